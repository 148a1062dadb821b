// Shared fixtures for the env tests: a temporary directory and a small real corpus.
#pragma once
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "env/dataset.h"

namespace stoa::env::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ =
        (std::filesystem::temp_directory_path() /
         ("stoa_env_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
            .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<CorpusDoc> small_corpus() {
  return {
      {"d1", "Borvex treats Velor syndrome\nBorvex is an effective treatment for Velor syndrome."},
      {"d2", "Genetics of Velor syndrome\nMutations in the KRAV3 gene cause Velor syndrome."},
      {"d3", "Pharmacokinetics of Borvex\nThe plasma half-life of Borvex was 12 hours."},
      {"d4", "Tamorin expression\nTamorin is highly expressed in Glial cells."},
      {"d5", "Unrelated\nThe weather in the laboratory was pleasant and dry."},
      {"d6", "Zentrax for Melvar fever\nZentrax is an effective treatment for Melvar fever."},
  };
}

}  // namespace stoa::env::testing
