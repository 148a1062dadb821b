// Typed, checked access to the fields of a config.json object. Every error names the file and the
// field, so a malformed config never reaches the engine as a silent default or a crash.
// Used by config.cpp and by each architecture's registry entry (arch_*.cpp).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace stoa {

// Bounds on config sizes: far above any real model, low enough that no shape product or
// parameter count can overflow int64, and a hostile config cannot ask for a billion tensors.
inline constexpr int64_t kMaxModelDim = int64_t{1} << 24;   // vocab, hidden, FFN widths
inline constexpr int64_t kMaxHeadCount = int64_t{1} << 12;  // heads, kv heads, head_dim
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxExperts = 1024;
inline constexpr int64_t kMaxConvKernel = 64;

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& object, std::string source)
      : object_(object), source_(std::move(source)) {}

  const std::string& source() const { return source_; }
  const nlohmann::json& object() const { return object_; }

  // The first of `names` present with a non-null value (HF writes absent options as null);
  // nullptr when none is. Earlier names take precedence: callers list the current HF name first
  // unless HF itself prefers the legacy one.
  const nlohmann::json* find(std::initializer_list<const char*> names, std::string* found) const;
  bool has(std::initializer_list<const char*> names) const;

  // Integers must be JSON integers (1024, not 1024.0 or "1024") that fit in int64.
  int64_t require_int(std::initializer_list<const char*> names) const;
  int64_t get_int(std::initializer_list<const char*> names, int64_t fallback) const;
  // A positive integer no larger than `max` (guards later shape products against overflow).
  int64_t require_size(std::initializer_list<const char*> names, int64_t max) const;
  int64_t get_size(std::initializer_list<const char*> names, int64_t fallback, int64_t max) const;
  double get_double(std::initializer_list<const char*> names, double fallback) const;
  std::optional<double> get_optional_double(std::initializer_list<const char*> names) const;
  bool get_bool(std::initializer_list<const char*> names, bool fallback) const;
  std::string get_string(std::initializer_list<const char*> names,
                         const std::string& fallback) const;
  // A token id: an integer, null (absent: -1) or a list of integers (the first is taken, as HF
  // generation does for eos lists).
  int64_t get_token_id(const char* name) const;
  std::optional<std::vector<int64_t>> get_int_list(const char* name) const;
  std::optional<std::vector<std::string>> get_string_list(const char* name) const;

  // RoPE base from `rope_theta` (or the legacy `theta`) or transformers 5's `rope_parameters`;
  // any rope scaling other than "default" is kUnsupported (no engine implements it).
  double get_rope_theta(double fallback) const;

  [[noreturn]] void field_error(const std::string& field, const std::string& what) const;

 private:
  int64_t as_int(const nlohmann::json& value, const std::string& field) const;

  const nlohmann::json& object_;
  std::string source_;
};

}  // namespace stoa
