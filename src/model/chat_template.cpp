#include "model/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "model/unicode.h"

namespace stoa {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STOA_CHECK(in, ErrorKind::kIo, path, ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  STOA_CHECK(!in.bad(), ErrorKind::kIo, path, ": read failed");
  return text.str();
}

// A special token in tokenizer_config.json: a string, null, or an AddedToken object.
std::string token_field(const nlohmann::json& config, const char* key, const std::string& source) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail(ErrorKind::kBadFormat, source, ": '", key, "' must be a string, null or {\"content\": ...}");
}

jinja::Value to_value(const nlohmann::ordered_json& j, int depth) {
  STOA_CHECK(depth < 64, ErrorKind::kInvalidArgument, "chat messages nested deeper than 64 levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return jinja::Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return jinja::Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return jinja::Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      STOA_CHECK(u <= static_cast<uint64_t>(INT64_MAX), ErrorKind::kInvalidArgument,
                 "chat message number ", u, " is out of range");
      return jinja::Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return jinja::Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: {
      const std::string& s = j.get_ref<const std::string&>();
      STOA_CHECK(unicode::is_valid_utf8(s), ErrorKind::kInvalidArgument,
                 "chat message text is not valid UTF-8");
      return jinja::Value(s);
    }
    case nlohmann::ordered_json::value_t::array: {
      jinja::List list;
      for (const auto& item : j) list.push_back(to_value(item, depth + 1));
      return jinja::Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      jinja::Dict dict;
      for (auto it = j.begin(); it != j.end(); ++it) {
        STOA_CHECK(unicode::is_valid_utf8(it.key()), ErrorKind::kInvalidArgument,
                   "chat message key is not valid UTF-8");
        jinja::dict_set(dict, it.key(), to_value(it.value(), depth + 1));
      }
      return jinja::Value(std::move(dict));
    }
    default:
      fail(ErrorKind::kInvalidArgument, "chat messages hold a value JSON cannot carry");
  }
}

}  // namespace

ChatTemplate ChatTemplate::from_text(const std::string& text, const std::string& source,
                                     std::string bos_token, std::string eos_token,
                                     bool add_bos_token) {
  STOA_CHECK(!add_bos_token || !bos_token.empty(), ErrorKind::kBadFormat, source,
             ": add_bos_token is set but there is no bos_token");
  return ChatTemplate(jinja::Template::parse(text, source), text, std::move(bos_token),
                      std::move(eos_token), add_bos_token);
}

std::optional<ChatTemplate> ChatTemplate::from_tokenizer_config(
    const std::string& config_text, const std::string& source,
    std::optional<std::string> template_override) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::kBadFormat, source, ": not JSON: ", e.what());
  }
  STOA_CHECK(config.is_object(), ErrorKind::kBadFormat, source, ": not a JSON object");
  std::string text;
  std::string template_source = source;
  if (template_override) {
    text = std::move(*template_override);
  } else {
    auto it = config.find("chat_template");
    if (it == config.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) {
      text = it->get<std::string>();
    } else if (it->is_array()) {
      bool found = false;
      for (const auto& named : *it) {
        STOA_CHECK(named.is_object() && named.contains("name") && named["name"].is_string() &&
                       named.contains("template") && named["template"].is_string(),
                   ErrorKind::kBadFormat, source,
                   ": each chat_template entry must be {\"name\": string, \"template\": string}");
        if (named["name"] == "default") {
          text = named["template"].get<std::string>();
          found = true;
        }
      }
      STOA_CHECK(found, ErrorKind::kBadFormat, source,
                 ": chat_template has no entry named 'default'");
      template_source += " (default)";
    } else {
      fail(ErrorKind::kBadFormat, source,
           ": chat_template must be a string or a list of named templates");
    }
  }
  auto add_bos = config.find("add_bos_token");
  STOA_CHECK(add_bos == config.end() || add_bos->is_boolean() || add_bos->is_null(),
             ErrorKind::kBadFormat, source, ": add_bos_token must be true or false");
  return from_text(text, template_source, token_field(config, "bos_token", source),
                   token_field(config, "eos_token", source),
                   add_bos != config.end() && add_bos->is_boolean() && add_bos->get<bool>());
}

std::optional<ChatTemplate> ChatTemplate::from_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path config_path = fs::path(dir) / "tokenizer_config.json";
  fs::path jinja_path = fs::path(dir) / "chat_template.jinja";
  std::optional<std::string> jinja_text;
  if (fs::exists(jinja_path)) jinja_text = read_text(jinja_path.string());
  if (!fs::exists(config_path)) {
    if (!jinja_text) return std::nullopt;
    return from_text(*jinja_text, jinja_path.string());
  }
  std::optional<ChatTemplate> t =
      from_tokenizer_config(read_text(config_path.string()), config_path.string(), jinja_text);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  STOA_CHECK(messages.is_array(), ErrorKind::kInvalidArgument, "chat messages must be a list");
  STOA_CHECK(extra.is_object(), ErrorKind::kInvalidArgument,
             "extra chat template variables must be an object");
  jinja::Dict vars;
  jinja::dict_set(vars, "messages", to_value(messages, 0));
  jinja::dict_set(vars, "add_generation_prompt", jinja::Value(add_generation_prompt));
  jinja::dict_set(vars, "bos_token", jinja::Value(bos_token_));
  jinja::dict_set(vars, "eos_token", jinja::Value(eos_token_));
  for (auto it = extra.begin(); it != extra.end(); ++it)
    jinja::dict_set(vars, it.key(), to_value(it.value(), 0));
  return template_.render(vars);
}

std::string ChatTemplate::generation_prompt(const nlohmann::ordered_json& messages,
                                            const nlohmann::ordered_json& extra) const {
  std::string text = render(messages, /*add_generation_prompt=*/true, extra);
  if (add_bos_token_ && text.compare(0, bos_token_.size(), bos_token_) != 0)
    text.insert(0, bos_token_);
  return text;
}

}  // namespace stoa
