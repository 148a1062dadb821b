#include "model/tokenizer.h"

#include <deque>

#include "core/error.h"
#include "core/file_bytes.h"
#include "model/tokenizer_state.h"
#include "model/unicode.h"

namespace stoa {

Tokenizer Tokenizer::from_file(const std::string& path) {
  return from_json(read_text_file(path, "tokenizer file"), path);
}

Tokenizer Tokenizer::from_json(const std::string& text, const std::string& source) {
  return Tokenizer(load_tokenizer_state(text, source));
}

namespace {

// Trims Unicode White_Space from one side of [begin, end) (added-token lstrip/rstrip).
void trim_end(std::string_view text, size_t begin, size_t& end) {
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!unicode::is_white_space(unicode::next_code_point(text, i))) return;
    end = start;
  }
}

void trim_begin(std::string_view text, size_t& begin, size_t end) {
  while (begin < end) {
    size_t i = begin;
    if (!unicode::is_white_space(unicode::next_code_point(text, i))) return;
    begin = i;
  }
}

struct Segment {
  size_t begin, end;  // text span, when id < 0
  int32_t id;         // an added token
};

// Splits text at added tokens (longest match at the earliest position), then applies lstrip and
// rstrip to the neighbouring text spans.
std::vector<Segment> split_added(std::string_view text, const AddedTokenMatcher& matcher,
                                 const std::vector<AddedToken>& tokens) {
  std::vector<Segment> segments;
  std::vector<int64_t> which;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t begin = 0;
    int64_t index = matcher.find(text, pos, begin, tokens);
    if (index < 0) break;
    if (begin > pos) {
      segments.push_back({pos, begin, -1});
      which.push_back(-1);
    }
    segments.push_back({begin, begin + tokens[index].match.size(), tokens[index].id});
    which.push_back(index);
    pos = begin + tokens[index].match.size();
  }
  if (pos < text.size()) {
    segments.push_back({pos, text.size(), -1});
    which.push_back(-1);
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    if (which[i] < 0) continue;
    const AddedToken& t = tokens[which[i]];
    if (t.lstrip && i > 0 && segments[i - 1].id < 0)
      trim_end(text, segments[i - 1].begin, segments[i - 1].end);
    if (t.rstrip && i + 1 < segments.size() && segments[i + 1].id < 0)
      trim_begin(text, segments[i + 1].begin, segments[i + 1].end);
  }
  return segments;
}

void encode_pieces(const TokenizerState& s, std::string_view text, std::vector<int32_t>& out) {
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  s.pre_tokenizer.split(text, pieces, arena);
  const auto& byte_strings = unicode::byte_level_strings();
  std::string spelled;
  for (std::string_view piece : pieces) {
    if (s.ignore_merges) {
      // ignore_merges: a piece that is a whole vocabulary token is taken as is (Llama 3).
      spelled.clear();
      for (char c : piece) spelled += byte_strings[static_cast<uint8_t>(c)];
      auto it = s.token_to_id.find(spelled);
      if (it != s.token_to_id.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    s.bpe->encode(piece, out);
  }
}

void encode_normalized(const TokenizerState& s, std::string_view text, std::vector<int32_t>& out) {
  std::string normalized;
  if (!s.normalizer.empty()) {
    normalized = std::string(text);
    for (auto form : s.normalizer) normalized = unicode::normalize(normalized, form);
    text = normalized;
  }
  if (s.normalized_matcher.empty()) {
    encode_pieces(s, text, out);
    return;
  }
  for (const Segment& seg : split_added(text, s.normalized_matcher, s.added_tokens)) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
    } else if (seg.end > seg.begin) {
      encode_pieces(s, text.substr(seg.begin, seg.end - seg.begin), out);
    }
  }
}

void encode_text(const TokenizerState& s, std::string_view text, std::vector<int32_t>& out) {
  for (const Segment& seg : split_added(text, s.raw_matcher, s.added_tokens)) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
    } else if (seg.end > seg.begin) {
      encode_normalized(s, text.substr(seg.begin, seg.end - seg.begin), out);
    }
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const TokenizerState& s = *state_;
  // Ill-formed UTF-8 cannot be normalised or matched by a UTF regex: repair it first (U+FFFD per
  // maximal ill-formed subpart), the same string a JS or Python caller would have passed.
  std::string repaired;
  if (!unicode::is_valid_utf8(text)) {
    repaired = unicode::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (!add_special_tokens) {
    encode_text(s, text, out);
    return out;
  }
  for (int32_t item : s.template_single) {
    if (item == TokenizerState::kSequence) {
      encode_text(s, text, out);
    } else {
      out.push_back(item);
    }
  }
  return out;
}

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const TokenizerState& s = *state_;
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= s.has_token.size() || !s.has_token[id]) {
      fail(ErrorKind::kInvalidArgument, s.source, ": token id ", id,
           " is not in the vocabulary (size ", s.has_token.size(), ")");
    }
    if (skip_special_tokens && s.special[id]) continue;
    out += s.id_bytes[id];
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes = decode_bytes(ids, skip_special_tokens);
  return unicode::is_valid_utf8(bytes) ? bytes : unicode::to_valid_utf8(bytes);
}

int64_t Tokenizer::vocab_size() const {
  return static_cast<int64_t>(state_->has_token.size());
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  auto it = state_->token_to_id.find(token);
  if (it == state_->token_to_id.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::token_text(int32_t id) const {
  const TokenizerState& s = *state_;
  if (id < 0 || static_cast<size_t>(id) >= s.has_token.size() || !s.has_token[id]) return {};
  return s.id_to_token[id];
}

bool Tokenizer::is_special(int32_t id) const {
  const TokenizerState& s = *state_;
  return id >= 0 && static_cast<size_t>(id) < s.special.size() && s.special[id];
}

const std::string& Tokenizer::source() const {
  return state_->source;
}

}  // namespace stoa
