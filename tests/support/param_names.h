// gtest parameter names: only letters, digits and '_' are allowed, so a preset's name
// ("tiny-lfm2moe") becomes "tiny_lfm2moe" — one rule for every parameterised suite.
#pragma once
#include <string>

#include <gtest/gtest.h>

namespace stoa::test {

inline std::string param_name(std::string name) {
  for (char& ch : name)
    if (ch == '-' || ch == '.') ch = '_';
  return name;
}

// For INSTANTIATE_TEST_SUITE_P(..., ::testing::Values("tiny-qwen3", ...), PresetParamName()).
// The parameter is a preset name (const char* or std::string).
struct PresetParamName {
  template <typename Name>
  std::string operator()(const ::testing::TestParamInfo<Name>& info) const {
    return param_name(std::string(info.param));
  }
};

}  // namespace stoa::test
