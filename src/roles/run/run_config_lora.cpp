#include "roles/run/run_config_lora.h"

#include <charconv>
#include <cstdio>
#include <set>
#include <sstream>

#include <filesystem>

#include "core/error.h"
#include "model/config.h"
#include "model/peft_adapter.h"
#include "train/lora.h"

namespace stoa::run {
namespace {

constexpr const char* kSection = "[trainer.lora]";

// The shortest text that reads back to the same double, marked as a float.
std::string float_text(double value) {
  char buf[64];
  std::string digits(buf, std::to_chars(buf, buf + sizeof(buf), value).ptr);
  if (digits.find_first_of(".en") == std::string::npos) digits += ".0";
  return digits;
}

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

void read_lora_section(const toml::node* node, const std::string& source,
                       train::TrainOptions* train, const std::string& base_dir) {
  train->lora = train::LoraOptions{};
  if (!node) return;
  const toml::table* table = node->as_table();
  STOA_CHECK(table, ErrorKind::kInvalidArgument, source,
             ": [trainer] lora must be a table (a [trainer.lora] section)");
  auto bad = [&](const std::string& key, const char* what) {
    fail(ErrorKind::kInvalidArgument, source, ": ", kSection, " ", key, " must be ", what);
  };
  static const std::set<std::string> kKeys = {"rank",           "alpha",      "dropout",
                                              "target_modules", "base_dtype", "init_adapter"};
  for (const auto& [k, v] : *table)
    STOA_CHECK(kKeys.count(std::string(k.str())), ErrorKind::kInvalidArgument, source,
               ": unknown key '", k.str(), "' in ", kSection,
               " (rank, alpha, dropout, target_modules, base_dtype, init_adapter)");

  train::LoraOptions& lora = train->lora;
  const toml::node* rank = table->get("rank");
  STOA_CHECK(rank, ErrorKind::kInvalidArgument, source, ": ", kSection,
             " needs rank (>= 1; leave the section out for full fine-tuning)");
  const auto rank_value = rank->value_exact<int64_t>();
  if (!rank_value || *rank_value < 1) bad("rank", "an integer >= 1 (absent section: no LoRA)");
  lora.rank = *rank_value;
  if (const toml::node* alpha = table->get("alpha")) {
    const auto v = alpha->value<double>();
    if (!v) bad("alpha", "a number");
    lora.alpha = *v;
  }
  if (const toml::node* dropout = table->get("dropout")) {
    const auto v = dropout->value<double>();
    if (!v) bad("dropout", "a number");
    lora.dropout = *v;
  }
  if (const toml::node* targets = table->get("target_modules")) {
    lora.targets.clear();
    if (auto one = targets->value_exact<std::string>()) {
      lora.targets.push_back(*one);
    } else if (const toml::array* list = targets->as_array()) {
      for (const toml::node& entry : *list) {
        auto name = entry.value_exact<std::string>();
        if (!name || name->empty()) bad("target_modules", "module names (strings)");
        lora.targets.push_back(*name);
      }
    } else {
      bad("target_modules", "a module name or a list of them");
    }
  }
  if (const toml::node* dtype = table->get("base_dtype")) {
    const auto name = dtype->value_exact<std::string>();
    if (!name || !parse_dtype(*name, &lora.base_dtype)) bad("base_dtype", "\"bf16\" or \"f32\"");
  }
  if (const toml::node* init = table->get("init_adapter")) {
    const auto dir = init->value_exact<std::string>();
    if (!dir || dir->empty()) bad("init_adapter", "a PEFT adapter directory (a string)");
    const std::filesystem::path path(*dir);
    lora.init_adapter = path.is_absolute() || base_dir.empty()
                            ? *dir
                            : (std::filesystem::path(base_dir) / path).lexically_normal().string();
  }
  try {
    train::validate_lora_options(lora);
  } catch (const Error& e) {
    fail(ErrorKind::kInvalidArgument, source, ": ", kSection, " ", e.what());
  }
  STOA_CHECK(train->sharding == train::Sharding::kZero1, ErrorKind::kInvalidArgument, source, ": ",
             kSection,
             " LoRA trains in one process so far: [trainer] sharding = \"fsdp\" cannot be used "
             "with it");
}

std::string lora_section_toml(const train::LoraOptions& lora) {
  if (!lora.enabled()) return "";
  std::ostringstream out;
  out << "\n" << kSection << "\n";
  out << "rank = " << lora.rank << "\n";
  out << "alpha = " << float_text(lora.alpha) << "\n";
  out << "dropout = " << float_text(lora.dropout) << "\n";
  out << "target_modules = [";
  for (size_t i = 0; i < lora.targets.size(); ++i)
    out << (i ? ", " : "") << quoted(lora.targets[i]);
  out << "]\n";
  out << "base_dtype = " << quoted(dtype_name(lora.base_dtype)) << "\n";
  if (!lora.init_adapter.empty()) out << "init_adapter = " << quoted(lora.init_adapter) << "\n";
  return out.str();
}

void check_lora_run(const train::TrainOptions& train, const std::string& model_dir) {
  if (!train.lora.enabled()) return;
  const std::string config_path = model_dir + "/config.json";
  const ModelConfig config = load_model_config(config_path);
  try {
    (void)train::lora_targets(config, train.lora);
  } catch (const Error& e) {
    fail(ErrorKind::kInvalidArgument, kSection, " target_modules against ", config_path, ": ",
         e.what());
  }
  if (train.lora.init_adapter.empty()) return;
  const PeftAdapter adapter = read_peft_adapter(train.lora.init_adapter);
  try {
    train::check_peft_adapter(adapter, config, train.lora, train.lora.init_adapter);
  } catch (const Error& e) {
    fail(ErrorKind::kInvalidArgument, kSection, " init_adapter: ", e.what());
  }
}

}  // namespace stoa::run
