#include "model/bpe_trainer.h"

#include <filesystem>
#include <fstream>
#include <queue>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/pretokenizer.h"
#include "model/unicode.h"

namespace stoa {

const char* const kQwenSplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct BpeTrainer::Impl {
  BpeTrainerOptions options;
  Regex regex;
  std::unordered_map<std::string, int64_t> words;
  std::vector<std::string> reserved;  // special + added tokens, cut out of the text

  explicit Impl(BpeTrainerOptions o)
      : options(std::move(o)), regex(options.split_regex, false, "BPE trainer split regex") {
    for (const auto& t : options.special_tokens) reserved.push_back(t);
    for (const auto& t : options.added_tokens) reserved.push_back(t);
    for (const auto& t : reserved) {
      STOA_CHECK(!t.empty() && unicode::is_valid_utf8(t), ErrorKind::kInvalidArgument,
                 "BPE trainer: special/added tokens must be non-empty UTF-8");
    }
  }

  void count(std::string_view segment) {
    if (segment.empty()) return;
    std::string normalized = unicode::normalize(segment, unicode::NormalForm::kNFC);
    std::vector<std::pair<size_t, size_t>> matches;
    regex.find_all(normalized, matches);
    std::string_view text = normalized;
    size_t prev = 0;
    // Isolated split: matches and the gaps between them are both words.
    for (auto [b, e] : matches) {
      if (b > prev) ++words[std::string(text.substr(prev, b - prev))];
      ++words[std::string(text.substr(b, e - b))];
      prev = e;
    }
    if (prev < text.size()) ++words[std::string(text.substr(prev))];
  }
};

BpeTrainer::BpeTrainer(BpeTrainerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
BpeTrainer::~BpeTrainer() = default;

int64_t BpeTrainer::word_count() const {
  return static_cast<int64_t>(impl_->words.size());
}

void BpeTrainer::add_text(std::string_view raw) {
  std::string repaired;
  if (!unicode::is_valid_utf8(raw)) {
    repaired = unicode::to_valid_utf8(raw);
    raw = repaired;
  }
  // Cut at the earliest (then longest) reserved token, as the tokenizer's added-token split does.
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t best = std::string_view::npos, best_len = 0;
    for (const auto& t : impl_->reserved) {
      size_t at = raw.find(t, pos);
      if (at < best || (at == best && at != std::string_view::npos && t.size() > best_len)) {
        best = at;
        best_len = t.size();
      }
    }
    if (best == std::string_view::npos) break;
    impl_->count(raw.substr(pos, best - pos));
    pos = best + best_len;
  }
  impl_->count(raw.substr(pos));
}

namespace {

uint64_t pack(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
int32_t left_of(uint64_t p) {
  return static_cast<int32_t>(p >> 32);
}
int32_t right_of(uint64_t p) {
  return static_cast<int32_t>(p & 0xFFFFFFFFu);
}

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

}  // namespace

TrainedBpe BpeTrainer::train() const {
  const BpeTrainerOptions& opt = impl_->options;
  const int64_t reserved = static_cast<int64_t>(impl_->reserved.size());
  STOA_CHECK(opt.vocab_size >= 256 + reserved, ErrorKind::kInvalidArgument,
             "BPE trainer: vocab size ", opt.vocab_size, " is below 256 bytes + ", reserved,
             " special/added tokens");
  const size_t learned_limit = static_cast<size_t>(opt.vocab_size - reserved);

  TrainedBpe out;
  out.options = opt;
  for (int b = 0; b < 256; ++b) out.tokens.push_back(std::string(1, static_cast<char>(b)));
  std::unordered_map<std::string, int32_t> token_ids;
  for (int b = 0; b < 256; ++b) token_ids[out.tokens[b]] = b;

  // Words sorted by their bytes so that every container below is filled in a fixed order.
  std::vector<std::pair<std::string, int64_t>> sorted(impl_->words.begin(), impl_->words.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<Word> words;
  words.reserve(sorted.size());
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (const auto& [text, n] : sorted) {
    Word w{{}, n};
    for (char c : text) w.symbols.push_back(static_cast<uint8_t>(c));
    for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
      uint64_t p = pack(w.symbols[i], w.symbols[i + 1]);
      pair_count[p] += n;
      where[p].push_back(static_cast<uint32_t>(words.size()));
    }
    words.push_back(std::move(w));
  }

  const std::vector<std::string>& tokens = out.tokens;
  struct Entry {
    int64_t count;
    uint64_t pair;
  };
  // Max-heap on count; on equal counts the lexicographically smallest (left, right) is on top.
  auto lower = [&tokens](const Entry& x, const Entry& y) {
    if (x.count != y.count) return x.count < y.count;
    int c = tokens[left_of(x.pair)].compare(tokens[left_of(y.pair)]);
    if (c != 0) return c > 0;
    return tokens[right_of(x.pair)].compare(tokens[right_of(y.pair)]) > 0;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(lower)> heap(lower);
  for (const auto& [p, n] : pair_count) heap.push({n, p});

  std::vector<uint32_t> stamp(words.size(), UINT32_MAX);
  std::vector<uint64_t> touched;
  while (out.tokens.size() < learned_limit && !heap.empty()) {
    Entry top = heap.top();
    heap.pop();
    auto it = pair_count.find(top.pair);
    int64_t current = it == pair_count.end() ? 0 : it->second;
    if (current != top.count) {  // stale entry: requeue with the live count
      if (current > 0) heap.push({current, top.pair});
      continue;
    }
    if (top.count < opt.min_frequency) break;
    int32_t a = left_of(top.pair), b = right_of(top.pair);
    std::string merged = out.tokens[a] + out.tokens[b];
    int32_t new_id;
    if (auto found = token_ids.find(merged); found != token_ids.end()) {
      new_id = found->second;  // the same bytes reached by another pair: one id (as HF does)
    } else {
      new_id = static_cast<int32_t>(out.tokens.size());
      out.tokens.push_back(merged);
      token_ids.emplace(merged, new_id);
    }
    const uint32_t merge_index = static_cast<uint32_t>(out.merges.size());
    out.merges.emplace_back(a, b);

    std::vector<uint32_t> affected = std::move(where[top.pair]);
    where.erase(top.pair);
    touched.clear();
    for (uint32_t wi : affected) {
      if (stamp[wi] == merge_index) continue;
      stamp[wi] = merge_index;
      Word& w = words[wi];
      std::vector<int32_t>& s = w.symbols;
      bool present = false;
      for (size_t i = 0; i + 1 < s.size() && !present; ++i) present = s[i] == a && s[i + 1] == b;
      if (!present) continue;  // stale index: an earlier merge consumed the pair here
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        uint64_t p = pack(s[i], s[i + 1]);
        pair_count[p] -= w.count;
        touched.push_back(p);
      }
      std::vector<int32_t> merged_symbols;
      merged_symbols.reserve(s.size());
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          merged_symbols.push_back(new_id);
          ++i;
        } else {
          merged_symbols.push_back(s[i]);
        }
      }
      s.swap(merged_symbols);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        uint64_t p = pack(s[i], s[i + 1]);
        pair_count[p] += w.count;
        touched.push_back(p);
        if (s[i] == new_id || s[i + 1] == new_id) where[p].push_back(wi);
      }
    }
    pair_count.erase(top.pair);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint64_t p : touched) {
      auto pc = pair_count.find(p);
      if (pc == pair_count.end()) continue;
      if (pc->second <= 0) {
        pair_count.erase(pc);
      } else {
        heap.push({pc->second, p});
      }
    }
  }
  out.first_special_id = static_cast<int32_t>(out.tokens.size());
  for (const auto& t : opt.special_tokens) out.tokens.push_back(t);
  for (const auto& t : opt.added_tokens) out.tokens.push_back(t);
  return out;
}

namespace {

std::string spell(const std::string& raw) {
  std::string out;
  for (char c : raw) out += unicode::byte_level_strings()[static_cast<uint8_t>(c)];
  return out;
}

nlohmann::json byte_level(bool with_regex_flag) {
  nlohmann::json j = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}};
  if (with_regex_flag) j["use_regex"] = false;
  return j;
}

}  // namespace

std::string TrainedBpe::tokenizer_json() const {
  using nlohmann::json;
  json added = json::array();
  const size_t n_special = options.special_tokens.size();
  for (size_t i = static_cast<size_t>(first_special_id); i < tokens.size(); ++i) {
    bool special = i - first_special_id < n_special;
    added.push_back({{"id", i},
                     {"content", tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", special}});
  }
  json vocab = json::object();
  for (size_t i = 0; i < static_cast<size_t>(first_special_id); ++i) vocab[spell(tokens[i])] = i;
  json merge_list = json::array();
  for (auto [a, b] : merges) merge_list.push_back({spell(tokens[a]), spell(tokens[b])});
  json root = {{"version", "1.0"},
               {"truncation", nullptr},
               {"padding", nullptr},
               {"added_tokens", added},
               {"normalizer", {{"type", "NFC"}}},
               {"pre_tokenizer",
                {{"type", "Sequence"},
                 {"pretokenizers",
                  {{{"type", "Split"},
                    {"pattern", {{"Regex", options.split_regex}}},
                    {"behavior", "Isolated"},
                    {"invert", false}},
                   byte_level(true)}}}},
               {"post_processor", byte_level(true)},
               {"decoder", byte_level(true)},
               {"model",
                {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", ""},
                 {"end_of_word_suffix", ""},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", false},
                 {"vocab", vocab},
                 {"merges", merge_list}}}};
  return root.dump(1);
}

std::string TrainedBpe::tokenizer_config_json() const {
  using nlohmann::json;
  json decoder = json::object();
  const size_t n_special = options.special_tokens.size();
  for (size_t i = static_cast<size_t>(first_special_id); i < tokens.size(); ++i) {
    decoder[std::to_string(i)] = {
        {"content", tokens[i]}, {"lstrip", false},
        {"normalized", false},  {"rstrip", false},
        {"single_word", false}, {"special", i - first_special_id < n_special}};
  }
  auto has_special = [&](const std::string& t) {
    return std::find(options.special_tokens.begin(), options.special_tokens.end(), t) !=
           options.special_tokens.end();
  };
  // ChatML, as Qwen uses: <|im_start|>role\ncontent<|im_end|>\n per message.
  const char* chat_template =
      "{%- for message in messages %}"
      "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
      "{%- endfor %}"
      "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
  json config = {
      {"add_bos_token", false},
      {"add_prefix_space", false},
      {"added_tokens_decoder", decoder},
      {"additional_special_tokens", options.special_tokens},
      {"bos_token", nullptr},
      {"chat_template", chat_template},
      {"clean_up_tokenization_spaces", false},
      {"eos_token", has_special("<|im_end|>") ? json("<|im_end|>") : json(nullptr)},
      {"pad_token", has_special("<|endoftext|>") ? json("<|endoftext|>") : json(nullptr)},
      {"errors", "replace"},
      {"model_max_length", 32768},
      {"split_special_tokens", false},
      {"tokenizer_class", "Qwen2Tokenizer"},
      {"unk_token", nullptr}};
  return config.dump(1);
}

void TrainedBpe::write(const std::string& dir) const {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(ErrorKind::kIo, dir, ": cannot create directory: ", ec.message());
  for (const auto& [name, text] :
       {std::pair<std::string, std::string>{"tokenizer.json", tokenizer_json()},
        {"tokenizer_config.json", tokenizer_config_json()}}) {
    std::string path = dir + "/" + name;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text << "\n";
    f.close();
    if (!f) fail(ErrorKind::kIo, path, ": write failed");
  }
}

}  // namespace stoa
