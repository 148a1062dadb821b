// The byte-level BPE model: merges by rank over the bytes of one pre-tokenized piece.
// Symbols are token ids from the start (each byte maps to the id of its GPT-2 byte character), and
// a merge table keyed by the id pair gives (rank, merged id), so merging never builds strings.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace stoa {

// Open-addressing map (id a, id b) -> (rank, merged id); lookups are one multiply and a probe.
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  // Returns false if the pair was already present; the new value replaces it (a repeated merge
  // takes its later rank, as in the Rust and JS tokenizers).
  bool insert(int32_t a, int32_t b, Merge merge);
  const Merge* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = pack(a, b);
    for (size_t i = hash(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.merge;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t hash(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void grow();
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

// Applies merges to `symbols` in place: repeatedly the lowest-rank adjacent pair, the leftmost
// on ties (the rule of the Rust crate and the JS oracle). The scan form is O(n^2) with a tiny
// constant and wins on short pieces; the heap form is O(n log n) for long ones. Exposed so the
// tests can check that they agree.
void bpe_merge_scan(std::vector<int32_t>& symbols, const MergeTable& merges);
void bpe_merge_heap(std::vector<int32_t>& symbols, const MergeTable& merges);

class BpeModel {
 public:
  // byte_ids[b]: the id of byte b's GPT-2 character token, or -1 if the vocabulary lacks it
  // (such bytes become unk_id, or are dropped when there is no unk token, as in the Rust crate).
  BpeModel(std::array<int32_t, 256> byte_ids, MergeTable merges, int32_t unk_id);

  // Encodes the raw UTF-8 bytes of one piece and appends the ids. Thread-safe.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  const MergeTable& merges() const { return merges_; }

 private:
  void encode_uncached(std::string_view piece, std::vector<int32_t>& out) const;

  std::array<int32_t, 256> byte_ids_;
  MergeTable merges_;
  int32_t unk_id_;

  // Cache of frequent pieces. Sharded by hash so concurrent encode() calls rarely contend; a
  // shard that fills up is cleared (bounded memory, no LRU bookkeeping on the hot path).
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, PieceHash, std::equal_to<>> map;
  };
  static constexpr size_t kShards = 16;
  static constexpr size_t kShardCapacity = 4096;
  static constexpr size_t kMaxCachedBytes = 64;
  std::unique_ptr<Shard[]> cache_;
};

}  // namespace stoa
