#include "model/config_json.h"

#include <limits>

#include "core/error.h"

namespace stoa {

namespace {

// "'a'" or "'a' (or 'b')": the field names a missing-field message offers.
std::string names_string(std::initializer_list<const char*> names) {
  std::string out;
  size_t i = 0;
  for (const char* name : names) {
    out += i == 0 ? cat("'", name, "'") : cat(i == 1 ? " (or '" : ", '", name, "'");
    ++i;
  }
  if (names.size() > 1) out += ")";
  return out;
}

std::string short_dump(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

}  // namespace

void ConfigReader::field_error(const std::string& field, const std::string& what) const {
  fail(ErrorKind::kBadFormat, source_, ": field '", field, "': ", what);
}

const nlohmann::json* ConfigReader::find(std::initializer_list<const char*> names,
                                         std::string* found) const {
  for (const char* name : names) {
    auto it = object_.find(name);
    if (it != object_.end() && !it->is_null()) {
      if (found) *found = name;
      return &*it;
    }
  }
  return nullptr;
}

bool ConfigReader::has(std::initializer_list<const char*> names) const {
  return find(names, nullptr) != nullptr;
}

int64_t ConfigReader::as_int(const nlohmann::json& value, const std::string& field) const {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      field_error(field, cat("integer ", v, " is out of range"));
    }
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  field_error(field, cat("expected an integer, got ", short_dump(value)));
}

int64_t ConfigReader::require_int(std::initializer_list<const char*> names) const {
  std::string field;
  const nlohmann::json* value = find(names, &field);
  if (!value) fail(ErrorKind::kBadFormat, source_, ": missing field ", names_string(names));
  return as_int(*value, field);
}

int64_t ConfigReader::get_int(std::initializer_list<const char*> names, int64_t fallback) const {
  std::string field;
  const nlohmann::json* value = find(names, &field);
  return value ? as_int(*value, field) : fallback;
}

int64_t ConfigReader::require_size(std::initializer_list<const char*> names, int64_t max) const {
  std::string field;
  const nlohmann::json* value = find(names, &field);
  if (!value) fail(ErrorKind::kBadFormat, source_, ": missing field ", names_string(names));
  int64_t v = as_int(*value, field);
  if (v <= 0 || v > max) field_error(field, cat("must be in [1, ", max, "], got ", v));
  return v;
}

int64_t ConfigReader::get_size(std::initializer_list<const char*> names, int64_t fallback,
                               int64_t max) const {
  return has(names) ? require_size(names, max) : fallback;
}

double ConfigReader::get_double(std::initializer_list<const char*> names, double fallback) const {
  return get_optional_double(names).value_or(fallback);
}

std::optional<double> ConfigReader::get_optional_double(
    std::initializer_list<const char*> names) const {
  std::string field;
  const nlohmann::json* value = find(names, &field);
  if (!value) return std::nullopt;
  if (!value->is_number()) field_error(field, cat("expected a number, got ", short_dump(*value)));
  return value->get<double>();
}

bool ConfigReader::get_bool(std::initializer_list<const char*> names, bool fallback) const {
  std::string field;
  const nlohmann::json* value = find(names, &field);
  if (!value) return fallback;
  if (!value->is_boolean())
    field_error(field, cat("expected true or false, got ", short_dump(*value)));
  return value->get<bool>();
}

std::string ConfigReader::get_string(std::initializer_list<const char*> names,
                                     const std::string& fallback) const {
  std::string field;
  const nlohmann::json* value = find(names, &field);
  if (!value) return fallback;
  if (!value->is_string()) field_error(field, cat("expected a string, got ", short_dump(*value)));
  return value->get<std::string>();
}

int64_t ConfigReader::get_token_id(const char* name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return -1;
  std::string field = name;
  const nlohmann::json* value = &*it;
  if (it->is_array()) {
    if (it->empty()) return -1;
    field = cat(name, "[0]");
    value = &it->front();
  }
  int64_t id = as_int(*value, field);
  if (id < 0) field_error(field, cat("token id must not be negative, got ", id));
  return id;
}

std::optional<std::vector<int64_t>> ConfigReader::get_int_list(const char* name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) field_error(name, cat("expected a list of integers, got ", short_dump(*it)));
  std::vector<int64_t> out;
  for (size_t i = 0; i < it->size(); ++i) out.push_back(as_int((*it)[i], cat(name, "[", i, "]")));
  return out;
}

std::optional<std::vector<std::string>> ConfigReader::get_string_list(const char* name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) field_error(name, cat("expected a list of strings, got ", short_dump(*it)));
  std::vector<std::string> out;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& item = (*it)[i];
    if (!item.is_string()) {
      field_error(cat(name, "[", i, "]"), cat("expected a string, got ", short_dump(item)));
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

double ConfigReader::get_rope_theta(double fallback) const {
  auto check_type = [&](const nlohmann::json& params, const std::string& field) {
    for (const char* key : {"rope_type", "type"}) {
      auto it = params.find(key);
      if (it == params.end() || it->is_null()) continue;
      if (!it->is_string()) field_error(field, cat("'", key, "' must be a string"));
      if (it->get<std::string>() != "default") {
        fail(ErrorKind::kUnsupported, source_, ": field '", field, "': RoPE type '",
             it->get<std::string>(), "' is not supported (only default RoPE)");
      }
    }
  };
  if (const nlohmann::json* scaling = find({"rope_scaling"}, nullptr)) {
    if (!scaling->is_object()) field_error("rope_scaling", "expected an object or null");
    check_type(*scaling, "rope_scaling");
  }
  if (const nlohmann::json* params = find({"rope_parameters"}, nullptr)) {
    if (!params->is_object()) field_error("rope_parameters", "expected an object or null");
    // transformers 5 may nest the parameters per layer type ({"full_attention": {...}}).
    const nlohmann::json* inner = params;
    std::string field = "rope_parameters";
    if (!params->contains("rope_theta") && params->contains("full_attention")) {
      inner = &(*params)["full_attention"];
      field = "rope_parameters.full_attention";
      if (!inner->is_object()) field_error(field, "expected an object");
    }
    check_type(*inner, field);
    auto it = inner->find("rope_theta");
    if (it != inner->end() && !it->is_null()) {
      if (!it->is_number()) field_error(field + ".rope_theta", "expected a number");
      return it->get<double>();
    }
  }
  return get_double({"rope_theta", "theta"}, fallback);
}

}  // namespace stoa
