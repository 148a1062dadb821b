#include "env/jsonl.h"

#include "core/error.h"

namespace stoa::env {

std::string json_string(const nlohmann::json& record, const char* field) {
  STOA_CHECK(record.is_object(), ErrorKind::kBadFormat, "record is not a JSON object");
  auto it = record.find(field);
  STOA_CHECK(it != record.end(), ErrorKind::kBadFormat, "missing field \"", field, "\"");
  STOA_CHECK(it->is_string(), ErrorKind::kBadFormat, "field \"", field, "\" is not a string");
  return it->get<std::string>();
}

std::string json_id(const nlohmann::json& record, const char* field) {
  STOA_CHECK(record.is_object(), ErrorKind::kBadFormat, "record is not a JSON object");
  auto it = record.find(field);
  if (it != record.end() && it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return json_string(record, field);
}

}  // namespace stoa::env
