// Dataset records read from JSONL: the reader is core/jsonl.h (errors name the file and the
// line; a malformed line fatal or skipped and counted); here the field helpers the loaders use.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/jsonl.h"

namespace stoa::env {

using stoa::BadLinePolicy;
using stoa::JsonlStats;
using stoa::read_jsonl;

// Required string field; throws kBadFormat naming the field when missing or not a string.
std::string json_string(const nlohmann::json& record, const char* field);
// Required id: a string, or an integer (PubMed ids often are) kept as its decimal text.
std::string json_id(const nlohmann::json& record, const char* field);

}  // namespace stoa::env
