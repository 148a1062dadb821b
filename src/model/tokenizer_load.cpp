// Parsing tokenizer.json into a TokenizerState. Everything we do not implement is refused with
// kUnsupported naming the component, rather than silently tokenizing differently from Hugging Face.
#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "core/error.h"
#include "model/tokenizer_json.h"
#include "model/tokenizer_state.h"

namespace stoa {

using tokjson::Json;

void AddedTokenMatcher::add(std::string_view content, size_t index) {
  if (content.empty()) return;
  by_first_byte_[static_cast<uint8_t>(content[0])].push_back(index);
  ++count_;
}

int64_t AddedTokenMatcher::find(std::string_view text, size_t pos, size_t& begin,
                                const std::vector<AddedToken>& tokens) const {
  if (count_ == 0) return -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto& bucket = by_first_byte_[static_cast<uint8_t>(text[i])];
    int64_t best = -1;
    size_t best_len = 0;
    for (size_t index : bucket) {
      const std::string& c = tokens[index].match;
      if (c.size() > best_len && text.compare(i, c.size(), c) == 0) {
        best = static_cast<int64_t>(index);
        best_len = c.size();
      }
    }
    if (best >= 0) {
      begin = i;
      return best;
    }
  }
  return -1;
}

namespace {

unicode::NormalForm parse_form(const Json& spec, const std::string& source,
                               const std::string& where) {
  std::string type = tokjson::string_at(spec, "type", source, where);
  if (type == "NFC") return unicode::NormalForm::kNFC;
  if (type == "NFD") return unicode::NormalForm::kNFD;
  if (type == "NFKC") return unicode::NormalForm::kNFKC;
  if (type == "NFKD") return unicode::NormalForm::kNFKD;
  fail(ErrorKind::kUnsupported, source, ": ", where, ": normalizer type \"", type,
       "\" is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence)");
}

void parse_normalizer(const Json& spec, const std::string& source, const std::string& where,
                      std::vector<unicode::NormalForm>& out) {
  if (spec.is_null()) return;
  if (tokjson::string_at(spec, "type", source, where) == "Sequence") {
    const Json& list = tokjson::object_at(spec, "normalizers", source, where);
    if (!list.is_array()) tokjson::bad(source, where + ".normalizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_normalizer(list[i], source, cat(where, ".normalizers[", i, "]"), out);
    return;
  }
  out.push_back(parse_form(spec, source, where));
}

int32_t lookup(const TokenizerState& s, const std::string& token, const std::string& where) {
  auto it = s.token_to_id.find(token);
  if (it == s.token_to_id.end()) {
    tokjson::bad(s.source, where, cat("token \"", token, "\" is not in the vocabulary"));
  }
  return it->second;
}

void parse_post_processor(const Json& spec, const std::string& where, TokenizerState& s) {
  if (spec.is_null()) return;
  std::string type = tokjson::string_at(spec, "type", s.source, where);
  if (type == "ByteLevel") return;  // only adjusts offsets, which we do not report
  if (type == "Sequence") {
    const Json& list = tokjson::object_at(spec, "processors", s.source, where);
    if (!list.is_array()) tokjson::bad(s.source, where + ".processors", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_post_processor(list[i], cat(where, ".processors[", i, "]"), s);
    return;
  }
  if (type != "TemplateProcessing") {
    fail(ErrorKind::kUnsupported, s.source, ": ", where, ": post_processor type \"", type,
         "\" is not supported (supported: ByteLevel, TemplateProcessing, Sequence)");
  }
  const Json& single = tokjson::object_at(spec, "single", s.source, where);
  if (!single.is_array()) tokjson::bad(s.source, where + ".single", "expected an array");
  s.template_single.clear();
  bool has_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    std::string item_where = cat(where, ".single[", i, "]");
    const Json& item = single[i];
    if (tokjson::has(item, "Sequence")) {
      const Json& seq = item.at("Sequence");
      if (tokjson::string_at(seq, "id", s.source, item_where + ".Sequence") != "A") {
        tokjson::bad(s.source, item_where, "the single-sequence template may only use sequence A");
      }
      s.template_single.push_back(TokenizerState::kSequence);
      has_sequence = true;
    } else if (tokjson::has(item, "SpecialToken")) {
      std::string name =
          tokjson::string_at(item.at("SpecialToken"), "id", s.source, item_where + ".SpecialToken");
      // The template's special_tokens table may map the name to several ids; else the name is
      // itself a token.
      const Json* table =
          tokjson::has(spec, "special_tokens") ? &spec.at("special_tokens") : nullptr;
      if (table && table->is_object() && table->contains(name)) {
        const Json& ids = tokjson::object_at(table->at(name), "ids", s.source,
                                             cat(where, ".special_tokens.", name));
        if (!ids.is_array()) tokjson::bad(s.source, cat(where, ".special_tokens.", name), "ids");
        for (const Json& id : ids)
          s.template_single.push_back(
              tokjson::id_of(id, s.source, cat(where, ".special_tokens.", name, ".ids")));
      } else {
        s.template_single.push_back(lookup(s, name, item_where));
      }
    } else {
      tokjson::bad(s.source, item_where, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!has_sequence) tokjson::bad(s.source, where + ".single", "the template has no sequence A");
}

void check_decoder(const Json& spec, const std::string& source, const std::string& where) {
  if (spec.is_null()) {
    fail(ErrorKind::kUnsupported, source, ": ", where,
         " is null; only the ByteLevel decoder is supported");
  }
  std::string type = tokjson::string_at(spec, "type", source, where);
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const Json& list = tokjson::object_at(spec, "decoders", source, where);
    if (!list.is_array() || list.empty())
      tokjson::bad(source, where + ".decoders", "expected a non-empty array");
    for (size_t i = 0; i < list.size(); ++i)
      check_decoder(list[i], source, cat(where, ".decoders[", i, "]"));
    return;
  }
  fail(ErrorKind::kUnsupported, source, ": ", where, ": decoder type \"", type,
       "\" is not supported (supported: ByteLevel)");
}

// What a vocabulary token decodes to: GPT-2 byte characters back to bytes; a token containing
// any other character decodes to its own UTF-8 (the Rust crate's rule).
std::string byte_level_bytes(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size();) {
    int b = unicode::char_to_byte(unicode::next_code_point(token, i));
    if (b < 0) return token;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

// Error paths build their JSON path lazily: formatting one per vocabulary entry and merge cost
// more than the rest of loading.
void set_token(TokenizerState& s, int32_t id, const std::string& token,
               const std::function<std::string()>& where) {
  if (static_cast<size_t>(id) >= s.id_to_token.size()) {
    size_t n = std::max<size_t>(static_cast<size_t>(id) + 1, s.id_to_token.size() * 3 / 2);
    s.id_to_token.resize(n);
    s.has_token.resize(n, 0);
  }
  if (s.has_token[id] && s.id_to_token[id] != token) {
    tokjson::bad(
        s.source, where(),
        cat("id ", id, " is used by both \"", s.id_to_token[id], "\" and \"", token, "\""));
  }
  s.id_to_token[id] = token;
  s.has_token[id] = 1;
}

void parse_model(const Json& model, const tokjson::ParsedTokenizerJson& parsed, TokenizerState& s) {
  const std::string& src = s.source;
  if (!model.is_object()) tokjson::bad(src, "model", "expected a JSON object");
  std::string type = tokjson::has(model, "type") ? tokjson::string_at(model, "type", src, "model")
                                                 : std::string("BPE");
  if (type != "BPE") {
    fail(ErrorKind::kUnsupported, src, ": model type \"", type,
         "\" is not supported (only byte-level BPE)");
  }
  if (tokjson::has(model, "dropout") &&
      !(model.at("dropout").is_number() && model.at("dropout").get<double>() == 0.0)) {
    fail(ErrorKind::kUnsupported, src, ": model.dropout is set; BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (tokjson::has(model, key) && tokjson::string_at(model, key, src, "model") != "") {
      fail(ErrorKind::kUnsupported, src, ": model.", key, " is not supported in byte-level BPE");
    }
  }
  if (tokjson::bool_or(model, "byte_fallback", false, src, "model")) {
    fail(ErrorKind::kUnsupported, src,
         ": model.byte_fallback is not supported (byte-level BPE needs no fallback)");
  }
  s.ignore_merges = tokjson::bool_or(model, "ignore_merges", false, src, "model");

  const Json& vocab = tokjson::object_at(model, "vocab", src, "model");
  if (!vocab.is_object()) tokjson::bad(src, "model.vocab", "expected an object token -> id");
  if (parsed.vocab_error_seen) {
    tokjson::bad(src, cat("model.vocab[\"", parsed.vocab_error, "\"]"),
                 "expected an integer token id");
  }
  s.token_to_id.reserve(parsed.vocab.size() + 64);
  for (const auto& [token, raw_id] : parsed.vocab) {
    auto where = [&token = token] { return cat("model.vocab[\"", token, "\"]"); };
    if (raw_id < 0 || raw_id > tokjson::kMaxTokenId) {
      tokjson::bad(src, where(),
                   cat("token id ", raw_id, " out of range [0, ", tokjson::kMaxTokenId, "]"));
    }
    auto id = static_cast<int32_t>(raw_id);
    set_token(s, id, token, where);
    s.token_to_id.emplace(token, id);
  }

  std::array<int32_t, 256> byte_ids{};
  const auto& byte_strings = unicode::byte_level_strings();
  for (int b = 0; b < 256; ++b) {
    auto it = s.token_to_id.find(byte_strings[b]);
    byte_ids[b] = it == s.token_to_id.end() ? -1 : it->second;
  }
  int32_t unk_id = -1;
  if (tokjson::has(model, "unk_token")) {
    unk_id = lookup(s, tokjson::string_at(model, "unk_token", src, "model"), "model.unk_token");
  }

  const Json& merges = tokjson::object_at(model, "merges", src, "model");
  if (!merges.is_array()) tokjson::bad(src, "model.merges", "expected an array");
  if (parsed.merge_error >= 0) {
    tokjson::bad(src, cat("model.merges[", parsed.merge_error, "]"),
                 "expected \"a b\" or [\"a\", \"b\"]");
  }
  MergeTable table;
  std::string a, b, joined;
  for (size_t i = 0; i < parsed.merges.size(); ++i) {
    const tokjson::ParsedTokenizerJson::MergeEntry& m = parsed.merges[i];
    auto where = [i] { return cat("model.merges[", i, "]"); };
    const std::string* left = &m.a;
    const std::string* right = &m.b;
    if (!m.pair) {  // legacy "a b" form
      size_t space = m.a.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == m.a.size()) {
        tokjson::bad(src, where(), cat("\"", m.a, "\" is not \"a b\""));
      }
      a = m.a.substr(0, space);
      b = m.a.substr(space + 1);
      left = &a;
      right = &b;
    }
    joined.assign(*left).append(*right);
    auto find = [&](const std::string& token) {
      auto it = s.token_to_id.find(token);
      if (it == s.token_to_id.end()) {
        tokjson::bad(src, where(), cat("token \"", token, "\" is not in the vocabulary"));
      }
      return it->second;
    };
    int32_t merged = find(joined);
    int32_t ia = find(*left), ib = find(*right);
    // A repeated pair takes the later rank, as both the Rust and the JS tokenizers do.
    table.insert(ia, ib, {static_cast<int32_t>(i), merged});
  }
  s.bpe = std::make_unique<BpeModel>(byte_ids, std::move(table), unk_id);
}

void parse_added_tokens(const Json& list, TokenizerState& s) {
  if (list.is_null()) return;
  if (!list.is_array()) tokjson::bad(s.source, "added_tokens", "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    std::string where = cat("added_tokens[", i, "]");
    const Json& t = list[i];
    AddedToken token;
    token.id =
        tokjson::id_of(tokjson::object_at(t, "id", s.source, where), s.source, where + ".id");
    token.content = tokjson::string_at(t, "content", s.source, where);
    if (token.content.empty()) tokjson::bad(s.source, where + ".content", "empty token");
    if (!unicode::is_valid_utf8(token.content))
      tokjson::bad(s.source, where + ".content", "not valid UTF-8");
    token.special = tokjson::bool_or(t, "special", false, s.source, where);
    token.lstrip = tokjson::bool_or(t, "lstrip", false, s.source, where);
    token.rstrip = tokjson::bool_or(t, "rstrip", false, s.source, where);
    token.normalized = tokjson::bool_or(t, "normalized", !token.special, s.source, where);
    token.single_word = tokjson::bool_or(t, "single_word", false, s.source, where);
    // Added tokens may re-use a vocabulary id for the same string; a different string wins the
    // id (as in the oracle) only if the vocabulary did not spell it.
    if (static_cast<size_t>(token.id) < s.has_token.size() && s.has_token[token.id]) {
      s.has_token[token.id] = 0;
    }
    set_token(s, token.id, token.content, [&where] { return where; });
    s.token_to_id[token.content] = token.id;
    s.added_tokens.push_back(token);
  }
}

}  // namespace

std::shared_ptr<const TokenizerState> load_tokenizer_state(const std::string& text,
                                                           const std::string& source) {
  tokjson::ParsedTokenizerJson parsed = tokjson::parse_tokenizer_json(text, source);
  const Json& root = parsed.root;
  if (!root.is_object()) tokjson::bad(source, "(root)", "expected a JSON object");
  auto s = std::make_shared<TokenizerState>();
  s->source = source;
  for (const char* key : {"truncation", "padding"}) {
    if (tokjson::has(root, key)) {
      fail(ErrorKind::kUnsupported, source, ": \"", key,
           "\" is set; truncation and padding are the caller's job, set it to null");
    }
  }
  parse_model(tokjson::object_at(root, "model", source, "(root)"), parsed, *s);
  parse_added_tokens(root.contains("added_tokens") ? root.at("added_tokens") : Json(), *s);
  if (root.contains("normalizer"))
    parse_normalizer(root.at("normalizer"), source, "normalizer", s->normalizer);
  s->pre_tokenizer =
      PreTokenizer::from_json(tokjson::object_at(root, "pre_tokenizer", source, "(root)"), source);
  if (root.contains("post_processor"))
    parse_post_processor(root.at("post_processor"), "post_processor", *s);
  check_decoder(tokjson::object_at(root, "decoder", source, "(root)"), source, "decoder");

  size_t n = s->id_to_token.size();
  s->id_to_token.resize(n);
  s->has_token.resize(n, 0);
  s->special.assign(n, 0);
  s->id_bytes.resize(n);
  for (size_t id = 0; id < n; ++id) {
    if (s->has_token[id]) s->id_bytes[id] = byte_level_bytes(s->id_to_token[id]);
  }
  for (size_t i = 0; i < s->added_tokens.size(); ++i) {
    AddedToken& t = s->added_tokens[i];
    bool after_normalizer = t.normalized && !s->normalizer.empty();
    t.match = t.content;
    // A normalized token is looked for in normalised text, so it is normalised too (as the
    // oracle does).
    for (auto form : s->normalizer)
      if (after_normalizer) t.match = unicode::normalize(t.match, form);
    s->has_token[t.id] = 1;
    s->special[t.id] = t.special;
    s->id_bytes[t.id] = t.content;  // added tokens decode verbatim
    (after_normalizer ? s->normalized_matcher : s->raw_matcher).add(t.match, i);
  }
  // Shrink to the highest id actually used.
  while (!s->has_token.empty() && !s->has_token.back()) {
    s->has_token.pop_back();
    s->id_to_token.pop_back();
    s->id_bytes.pop_back();
    s->special.pop_back();
  }
  return s;
}

}  // namespace stoa
