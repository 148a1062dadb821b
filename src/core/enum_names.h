#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace stoa {

// One row per value of an enum: its printed name. The name function and the parser read the same
// rows, so the two directions cannot drift apart (each used to be its own switch or if-chain).
template <class Enum>
struct EnumName {
  Enum value;
  const char* name;
};

// The row's name for `value`; `unknown` for a value the table does not hold (a cast from a
// corrupt byte, say).
template <class Enum, std::size_t N>
constexpr const char* enum_name(const EnumName<Enum> (&table)[N], Enum value,
                                const char* unknown = "?") {
  for (const EnumName<Enum>& row : table) {
    if (row.value == value) return row.name;
  }
  return unknown;
}

// The value whose row is named exactly `name`; nullopt when none is.
template <class Enum, std::size_t N>
constexpr std::optional<Enum> enum_from_name(const EnumName<Enum> (&table)[N],
                                             std::string_view name) {
  for (const EnumName<Enum>& row : table) {
    if (name == row.name) return row.value;
  }
  return std::nullopt;
}

// Every row's name, joined by ", " (an error message's list of what is accepted).
template <class Enum, std::size_t N>
std::string enum_names_joined(const EnumName<Enum> (&table)[N]) {
  std::string out;
  for (const EnumName<Enum>& row : table) out += (out.empty() ? "" : ", ") + std::string(row.name);
  return out;
}

}  // namespace stoa
