# cmake -DSPV=in.spv -DHEADER=out.h -DSHADER=name -P embed_spirv.cmake
# Writes the SPIR-V words as `inline constexpr uint32_t k<Name>Spirv[]` (SPIR-V is a stream of
# little-endian 32-bit words; the file's bytes are regrouped into words here).
file(READ ${SPV} hex HEX)
string(LENGTH "${hex}" length)
math(EXPR remainder "${length} % 8")
if(NOT remainder EQUAL 0 OR length EQUAL 0)
  message(FATAL_ERROR "${SPV}: not a whole number of 32-bit words")
endif()
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
# Eight words a line (CMake's regular expressions have no {n}).
set(word "0x........u,")
string(REGEX REPLACE "(${word}${word}${word}${word}${word}${word}${word}${word})" "\\1\n  " words
       "${words}")
# k + CamelCase of the shader's name: q8_matvec -> kQ8MatvecSpirv.
string(REPLACE "_" ";" parts "${SHADER}")
set(name "k")
foreach(part ${parts})
  string(SUBSTRING "${part}" 0 1 first)
  string(SUBSTRING "${part}" 1 -1 rest)
  string(TOUPPER "${first}" first)
  string(APPEND name "${first}${rest}")
endforeach()
file(WRITE ${HEADER} "// Generated from ${SHADER}.comp by embed_spirv.cmake; do not edit.\n"
     "#pragma once\n#include <cstdint>\n\nnamespace stoa::gpu::vulkan {\n\n"
     "inline constexpr uint32_t ${name}Spirv[] = {\n  ${words}\n};\n\n}  // namespace stoa::gpu::vulkan\n")
