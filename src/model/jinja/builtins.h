// What a template can call: filters (x | trim), tests (x is string), attributes, indexing and
// slicing, the methods of strings, lists and dicts (s.startswith('<')), and the globals
// (range, namespace, raise_exception, dict). Failures throw stoa::Error(kInvalidArgument) with a
// message the evaluator prefixes with the template's name and line.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "model/jinja/value.h"

namespace stoa::jinja {

// Bounds a hostile template cannot exceed: any one string or list, and range().
inline constexpr size_t kMaxStringBytes = size_t{16} << 20;
inline constexpr size_t kMaxListItems = size_t{1} << 18;

void check_string_size(size_t bytes);
void check_list_size(size_t items);

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
Value apply_filter(const std::string& name, const Value& operand, CallArgs& args);
bool apply_test(const std::string& name, const Value& operand, CallArgs& args);

// obj.name: a dict's key or a namespace's attribute, else a bound method of a string, list or
// dict; undefined when there is none (Jinja's lenient attribute access).
Value get_attribute(const Value& object, const std::string& name);
// obj[index]: dict by key, list and string by (negative) position; undefined when absent.
Value get_index(const Value& object, const Value& index);
// obj[start:stop:step] on a list or string, Python's rules.
Value get_slice(const Value& object, const Value& start, const Value& stop, const Value& step);

// range, namespace, raise_exception, dict; undefined for any other name.
Value global_function(std::string_view name);

// Python's `a in b` for strings, lists and dicts.
bool contains(const Value& container, const Value& item);

// The tojson filter: compact JSON with ", " and ": " separators (Python's json.dumps) or, with
// indent > 0, one item per line; keys in insertion order, non-ASCII written as is.
std::string to_json(const Value& value, int indent);

}  // namespace stoa::jinja
