// Typed, strict access to the fields of untrusted JSON messages, shared by the protocol's codecs:
// a field of the wrong type, an integer out of range or a float where an integer belongs is
// refused with kInvalidArgument naming the message and the field.
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace stoa::net::json_fields {

using nlohmann::json;

// A JSON number as the integer type T, refusing floats, booleans and out-of-range values:
// nlohmann's get<T>() would cast 1e99 or -1 silently (the former is undefined behaviour).
template <typename T>
inline bool as_integer(const json& v, T* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
    *out = static_cast<T>(u);
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0) return false;
    } else {
      if (i < static_cast<int64_t>(std::numeric_limits<T>::min())) return false;
    }
    if (static_cast<uint64_t>(std::max<int64_t>(i, 0)) >
        static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return false;
    }
    *out = static_cast<T>(i);
    return true;
  }
  return false;
}

// True for std::vector of an integer type (token ids, mask bytes, versions).
template <typename T>
struct is_int_vector : std::false_type {};
template <typename T>
struct is_int_vector<std::vector<T>> : std::bool_constant<std::is_integral_v<T>> {};

// The field `field` of the object `j`, as it is (a nested message, say).
inline const json& require_field(const json& j, const char* msg, const char* field) {
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, msg, ": expected a JSON object");
  auto it = j.find(field);
  STOA_CHECK(it != j.end(), ErrorKind::kInvalidArgument, msg, ": missing field '", field, "'");
  return *it;
}

// Whether an optional field is given: `j` is an object holding `field` with a value that is not
// null.
inline bool has(const json& j, const char* field) {
  return j.is_object() && j.contains(field) && !j.at(field).is_null();
}

// Typed field access with messages that name the message and the field.
template <typename T>
T req(const json& j, const char* msg, const char* field) {
  const json* it = &require_field(j, msg, field);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    T out{};
    STOA_CHECK(as_integer(*it, &out), ErrorKind::kInvalidArgument, msg, ": field '", field,
               "' is not an integer in range (", it->dump().substr(0, 40), ")");
    return out;
  } else if constexpr (is_int_vector<T>::value) {
    STOA_CHECK(it->is_array(), ErrorKind::kInvalidArgument, msg, ": field '", field,
               "' is not an array");
    T out;
    out.reserve(it->size());
    for (size_t i = 0; i < it->size(); ++i) {
      typename T::value_type v{};
      STOA_CHECK(as_integer((*it)[i], &v), ErrorKind::kInvalidArgument, msg, ": field '", field,
                 "[", i, "]' is not an integer in range (", (*it)[i].dump().substr(0, 40), ")");
      out.push_back(v);
    }
    return out;
  } else {
    try {
      return it->get<T>();
    } catch (const json::exception& e) {
      fail(ErrorKind::kInvalidArgument, msg, ": field '", field, "' has the wrong type (",
           it->type_name(), ")");
    }
  }
}

template <typename T>
T opt(const json& j, const char* msg, const char* field, T fallback) {
  STOA_CHECK(j.is_object(), ErrorKind::kInvalidArgument, msg, ": expected a JSON object");
  if (!has(j, field)) return fallback;
  return req<T>(j, msg, field);
}

inline std::optional<uint64_t> opt_u64(const json& j, const char* msg, const char* field) {
  if (!has(j, field)) return std::nullopt;
  return req<uint64_t>(j, msg, field);
}

}  // namespace stoa::net::json_fields
