#include "train/sft_data.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/jsonl.h"

namespace stoa::train {
namespace {

using nlohmann::json;

void append(SftExample* ex, const std::vector<int32_t>& ids, uint8_t mask) {
  ex->tokens.insert(ex->tokens.end(), ids.begin(), ids.end());
  ex->mask.insert(ex->mask.end(), ids.size(), mask);
}

const Tokenizer& need_tokenizer(const SftDataOptions& o, const std::string& where) {
  STOA_CHECK(o.tokenizer != nullptr, ErrorKind::kInvalidArgument, where,
             ": text examples need the model directory's tokenizer.json");
  return *o.tokenizer;
}

std::string text_field(const json& j, const char* field, const std::string& where) {
  STOA_CHECK(j.contains(field) && j[field].is_string(), ErrorKind::kBadFormat, where, ": field \"",
             field, "\" must be a string");
  return j[field].get<std::string>();
}

SftExample parse_example(const json& j, const std::string& where, const SftDataOptions& o) {
  STOA_CHECK(j.is_object(), ErrorKind::kBadFormat, where, ": not a JSON object");
  SftExample ex;
  if (j.contains("id")) {
    STOA_CHECK(j["id"].is_string() || j["id"].is_number_integer(), ErrorKind::kBadFormat, where,
               ": field \"id\" must be a string or an integer");
    ex.id =
        j["id"].is_string() ? j["id"].get<std::string>() : std::to_string(j["id"].get<int64_t>());
  } else {
    ex.id = where;
  }
  if (j.contains("tokens")) {
    STOA_CHECK(j["tokens"].is_array(), ErrorKind::kBadFormat, where,
               ": field \"tokens\" must be an array of integers");
    for (const json& t : j["tokens"]) {
      STOA_CHECK(t.is_number_integer(), ErrorKind::kBadFormat, where,
                 ": field \"tokens\" must hold integers only");
      int64_t id = t.get<int64_t>();
      STOA_CHECK(id >= 0 && id < o.vocab_size, ErrorKind::kBadFormat, where, ": token id ", id,
                 " is outside the vocabulary [0, ", o.vocab_size, ")");
      ex.tokens.push_back(static_cast<int32_t>(id));
    }
    if (j.contains("mask")) {
      STOA_CHECK(j["mask"].is_array() && j["mask"].size() == ex.tokens.size(),
                 ErrorKind::kBadFormat, where, ": field \"mask\" must be an array of ",
                 ex.tokens.size(), " 0/1 values (one per token)");
      for (const json& m : j["mask"]) {
        STOA_CHECK((m.is_number_integer() && (m == 0 || m == 1)) || m.is_boolean(),
                   ErrorKind::kBadFormat, where, ": field \"mask\" must hold 0/1 values");
        ex.mask.push_back(m.is_boolean() ? m.get<bool>() : static_cast<uint8_t>(m.get<int>()));
      }
    } else {
      ex.mask.assign(ex.tokens.size(), 1);
    }
  } else if (j.contains("prompt") || j.contains("completion")) {
    const Tokenizer& tok = need_tokenizer(o, where);
    append(&ex, tok.encode(text_field(j, "prompt", where)), 0);
    append(&ex, tok.encode(text_field(j, "completion", where)), 1);
    if (o.eos_token_id >= 0) append(&ex, {o.eos_token_id}, 1);
  } else if (j.contains("messages")) {
    const Tokenizer& tok = need_tokenizer(o, where);
    STOA_CHECK(j["messages"].is_array() && !j["messages"].empty(), ErrorKind::kBadFormat, where,
               ": field \"messages\" must be a non-empty array");
    for (size_t i = 0; i < j["messages"].size(); ++i) {
      const json& msg = j["messages"][i];
      const std::string at = cat(where, ": messages[", i, "]");
      STOA_CHECK(msg.is_object(), ErrorKind::kBadFormat, at, " is not an object");
      std::string role = text_field(msg, "role", at);
      std::string content = text_field(msg, "content", at);
      const bool train = role == "assistant";
      append(&ex, tok.encode("<|im_start|>" + role + "\n"), 0);
      append(&ex, tok.encode(content), train);
      append(&ex, tok.encode("<|im_end|>"), train);
      append(&ex, tok.encode("\n"), 0);
    }
  } else {
    fail(ErrorKind::kBadFormat, where,
         ": an SFT example needs \"tokens\", \"prompt\"/\"completion\" or \"messages\"");
  }
  for (int32_t id : ex.tokens) {
    STOA_CHECK(id >= 0 && id < o.vocab_size, ErrorKind::kBadFormat, where,
               ": the tokenizer gave id ", id, ", outside the model's vocabulary [0, ",
               o.vocab_size, ")");
  }
  STOA_CHECK(ex.tokens.size() >= 2, ErrorKind::kBadFormat, where, ": the example has ",
             ex.tokens.size(), " tokens; it needs at least 2");
  ex.mask[0] = 0;  // nothing predicts the first token
  bool any = false;
  for (uint8_t m : ex.mask) any = any || m;
  STOA_CHECK(any, ErrorKind::kBadFormat, where, ": the example has no trained (mask = 1) tokens");
  return ex;
}

}  // namespace

std::vector<SftExample> parse_sft_jsonl(const std::string& text, const std::string& source,
                                        const SftDataOptions& options) {
  STOA_CHECK(options.vocab_size > 0, ErrorKind::kInvalidArgument, "SFT data needs a vocab size");
  std::vector<SftExample> out;
  std::istringstream in(text);
  JsonlReader reader(in, source);
  while (auto line = reader.next()) {
    const std::string where = cat(source, ":", line->number);
    STOA_CHECK(line->ok(), ErrorKind::kBadFormat, where, ": not valid JSON (", line->error, ")");
    out.push_back(parse_example(line->value, where, options));
  }
  STOA_CHECK(!out.empty(), ErrorKind::kBadFormat, source, " holds no SFT examples");
  return out;
}

std::vector<SftExample> load_sft_jsonl(const std::string& path, const SftDataOptions& options) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in, ErrorKind::kNotFound, "SFT data file ", path, " cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_sft_jsonl(text.str(), path, options);
}

std::vector<std::vector<SftExample>> batch_by_tokens(const std::vector<SftExample>& examples,
                                                     int64_t batch_tokens) {
  std::vector<std::vector<SftExample>> batches;
  int64_t used = 0;
  for (const SftExample& ex : examples) {
    const int64_t n = static_cast<int64_t>(ex.tokens.size());
    if (batches.empty() || used + n > batch_tokens) {
      batches.emplace_back();
      used = 0;
    }
    batches.back().push_back(ex);
    used += n;
  }
  return batches;
}

}  // namespace stoa::train
