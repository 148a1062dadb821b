#include "model/tokenizer_json.h"

#include <vector>

namespace stoa::tokjson {

namespace {

// A SAX consumer that builds the DOM for everything except model.vocab and model.merges, whose
// ~150k entries each it appends straight to flat vectors: the DOM of a Qwen-sized file costs
// several times the parse itself (one std::map node and several heap strings per entry).
class Sax : public nlohmann::json_sax<Json> {
 public:
  explicit Sax(ParsedTokenizerJson& out) : out_(out) {}

  bool null() override { return value(Json(nullptr)); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override { return integer(v, Json(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v),
                   Json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(Json(v)); }
  bool binary(binary_t&) override { return value(Json()); }
  bool string(string_t& v) override {
    Frame* f = top();
    if (f && f->mode == Mode::kMerges) {
      out_.merges.push_back({std::move(v), std::string(), false});
      return true;
    }
    if (f && f->mode == Mode::kMergePair) {
      auto& m = out_.merges.back();
      if (f->count == 0) {
        m.a = std::move(v);
      } else if (f->count == 1) {
        m.b = std::move(v);
      }
      ++f->count;
      return true;
    }
    return value(Json(std::move(v)));
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair, kSkip };
  struct Frame {
    Mode mode;
    Json* container;  // kDom only
    bool is_model;    // the root's "model" object
    int count;        // kMergePair: strings seen
  };

  Frame* top() { return stack_.empty() ? nullptr : &stack_.back(); }

  // Marks a malformed vocab/merges entry; the loader reports it with its JSON path.
  void vocab_error() {
    if (out_.vocab_error.empty()) out_.vocab_error = key_;
    out_.vocab_error_seen = true;
  }
  void merge_error() {
    if (out_.merge_error < 0) out_.merge_error = static_cast<int64_t>(out_.merges.size()) - 1;
  }

  bool integer(int64_t v, Json j) {
    Frame* f = top();
    if (f && f->mode == Mode::kVocab) {
      out_.vocab.emplace_back(std::move(key_), v);
      return true;
    }
    return value(std::move(j));
  }

  bool value(Json v) {
    Frame* f = top();
    if (!f) {
      out_.root = std::move(v);
      return true;
    }
    switch (f->mode) {
      case Mode::kDom:
        if (f->container->is_object()) {
          (*f->container)[key_] = std::move(v);
        } else {
          f->container->push_back(std::move(v));
        }
        return true;
      case Mode::kVocab:
        vocab_error();
        return true;
      case Mode::kMerges:
        out_.merges.push_back({});
        merge_error();
        return true;
      case Mode::kMergePair:
        ++f->count;
        merge_error();
        return true;
      case Mode::kSkip:
        return true;
    }
    return true;
  }

  bool open(bool object) {
    Frame* f = top();
    Json fresh = object ? Json::object() : Json::array();
    if (!f) {
      out_.root = std::move(fresh);
      stack_.push_back({Mode::kDom, &out_.root, false, 0});
      return true;
    }
    switch (f->mode) {
      case Mode::kDom: {
        bool in_model = f->is_model && f->container->is_object();
        if (in_model && object && key_ == "vocab") {
          out_.vocab_streamed = true;
          (*f->container)[key_] = Json::object();
          stack_.push_back({Mode::kVocab, nullptr, false, 0});
          return true;
        }
        if (in_model && !object && key_ == "merges") {
          out_.merges_streamed = true;
          (*f->container)[key_] = Json::array();
          stack_.push_back({Mode::kMerges, nullptr, false, 0});
          return true;
        }
        Json* child;
        if (f->container->is_object()) {
          child = &((*f->container)[key_] = std::move(fresh));
        } else {
          f->container->push_back(std::move(fresh));
          child = &f->container->back();
        }
        bool is_model = stack_.size() == 1 && object && key_ == "model";
        stack_.push_back({Mode::kDom, child, is_model, 0});
        return true;
      }
      case Mode::kVocab:
        vocab_error();
        break;
      case Mode::kMerges:
        out_.merges.push_back({});
        if (!object) {
          stack_.push_back({Mode::kMergePair, nullptr, false, 0});
          return true;
        }
        merge_error();
        break;
      case Mode::kMergePair:
        ++f->count;
        merge_error();
        break;
      case Mode::kSkip:
        break;
    }
    stack_.push_back({Mode::kSkip, nullptr, false, 0});
    return true;
  }

  bool close() {
    Frame f = stack_.back();
    stack_.pop_back();
    if (f.mode == Mode::kMergePair) {
      out_.merges.back().pair = true;
      if (f.count != 2) merge_error();
    }
    return true;
  }

  ParsedTokenizerJson& out_;
  std::vector<Frame> stack_;
  std::string key_;
  std::string error_;
};

}  // namespace

ParsedTokenizerJson parse_tokenizer_json(const std::string& text, const std::string& source) {
  ParsedTokenizerJson out;
  Sax sax(out);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &sax);
  } catch (const Json::exception& e) {
    fail(ErrorKind::kBadFormat, source, ": not valid JSON (truncated or corrupt?): ", e.what());
  }
  if (!ok) {
    fail(ErrorKind::kBadFormat, source, ": not valid JSON (truncated or corrupt?): ", sax.error());
  }
  return out;
}

}  // namespace stoa::tokjson
