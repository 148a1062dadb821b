# Cross-compiles for 64-bit ARM Linux on Debian 12 (x86-64 host): Debian's cross compiler
# (g++-aarch64-linux-gnu) and the arm64 multiarch -dev packages, all installed by
# `scripts/setup --arm64`. Multiarch puts the arm64 libraries beside the host's, under
# /usr/lib/aarch64-linux-gnu, so there is no separate sysroot: CMake finds them through
# CMAKE_LIBRARY_ARCHITECTURE, which it takes from the compiler.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(stoa_cross_triple aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${stoa_cross_triple}-gcc)
set(CMAKE_CXX_COMPILER ${stoa_cross_triple}-g++)

# pkg-config must see only the arm64 .pc files (and the architecture-independent ones).
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${stoa_cross_triple}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Test binaries run under qemu-user; ctest prefixes every test command with this. QEMU_CPU (env)
# picks the emulated CPU: cortex-a57 (plain NEON), cortex-a76 (+dotprod), max (+i8mm, SVE2).
# The loader and the libraries must come from ONE glibc build. With the multiarch libc6:arm64
# installed (scripts/setup --arm64) qemu takes the binary's interpreter, /lib/ld-linux-aarch64.so.1,
# from the host's multiarch tree, as binfmt_misc does for the children a test starts; `-L` would
# take the cross toolchain's own ld.so (2.36-8cross1 on Debian 12) while that ld.so still loads
# the multiarch libc.so.6 (2.36-9+deb12u14): the mixed pair made the first pthread_create walk a
# corrupt stack-cache list forever (test_engine "hung" under qemu, 1 Dec). -L is kept only for a
# machine without the multiarch libc, where the cross toolchain's copy is the only arm64 glibc.
find_program(STOA_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(STOA_QEMU_AARCH64)
  if(EXISTS /lib/ld-linux-aarch64.so.1 AND EXISTS /usr/lib/${stoa_cross_triple}/libc.so.6)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${STOA_QEMU_AARCH64})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${STOA_QEMU_AARCH64} -L /usr/${stoa_cross_triple})
  endif()
endif()

# libxapian-dev is not Multi-Arch: same (installing its arm64 copy would remove the host's), so
# scripts/setup --arm64 unpacks the arm64 .deb under .deps/arm64/xapian-dev and installs only the
# runtime library (libxapian30:arm64). Its CMake config names the unversioned .so that only the
# -dev package ships; link the runtime library instead.
get_filename_component(stoa_toolchain_root "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
set(stoa_xapian_dir "${stoa_toolchain_root}/.deps/arm64/xapian-dev/usr/lib/${stoa_cross_triple}/cmake/xapian")
if(EXISTS "${stoa_xapian_dir}/xapian-config.cmake")
  set(xapian_DIR "${stoa_xapian_dir}" CACHE PATH "arm64 Xapian CMake config (scripts/setup --arm64)")
  set(XAPIAN_SHARED_LIBRARY "/usr/lib/${stoa_cross_triple}/libxapian.so.30" CACHE FILEPATH "arm64 Xapian")
endif()
