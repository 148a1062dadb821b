#include "model/tokenizer_bpe.h"

#include <functional>
#include <queue>

namespace stoa {

bool MergeTable::insert(int32_t a, int32_t b, Merge merge) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  uint64_t key = pack(a, b);
  for (size_t i = hash(key);; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.merge = merge;
      return false;
    }
    if (s.key == kEmpty) {
      s.key = key;
      s.merge = merge;
      ++size_;
      return true;
    }
  }
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  size_t capacity = old.empty() ? 64 : old.size() * 2;
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    for (size_t i = hash(s.key);; i = (i + 1) & mask_) {
      if (slots_[i].key == kEmpty) {
        slots_[i] = s;
        ++size_;
        break;
      }
    }
  }
}

void bpe_merge_scan(std::vector<int32_t>& symbols, const MergeTable& merges) {
  while (symbols.size() > 1) {
    int32_t best_rank = INT32_MAX;
    size_t best = 0;
    int32_t best_id = -1;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const MergeTable::Merge* m = merges.find(symbols[i], symbols[i + 1]);
      if (m && m->rank < best_rank) {  // strict: the leftmost pair wins ties
        best_rank = m->rank;
        best = i;
        best_id = m->id;
      }
    }
    if (best_id < 0) return;
    symbols[best] = best_id;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

void bpe_merge_heap(std::vector<int32_t>& symbols, const MergeTable& merges) {
  const size_t n = symbols.size();
  if (n < 2) return;
  // Doubly linked list over positions; a heap of candidate pairs keyed by (rank, left position).
  // Entries go stale when a neighbour merges; they are recognised on pop by comparing the ids
  // they were made for with the current ones.
  std::vector<int32_t> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left_id;
    int32_t right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    int32_t r = next[pos];
    if (const MergeTable::Merge* m = merges.find(symbols[pos], symbols[r]))
      heap.push({m->rank, pos, symbols[pos], symbols[r]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    int32_t r = next[c.pos];
    if (!alive[c.pos] || r < 0 || symbols[c.pos] != c.left_id || symbols[r] != c.right_id) {
      continue;
    }
    symbols[c.pos] = merges.find(c.left_id, c.right_id)->id;
    alive[r] = 0;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) symbols[out++] = symbols[i];
  symbols.resize(out);
}

BpeModel::BpeModel(std::array<int32_t, 256> byte_ids, MergeTable merges, int32_t unk_id)
    : byte_ids_(byte_ids),
      merges_(std::move(merges)),
      unk_id_(unk_id),
      cache_(std::make_unique<Shard[]>(kShards)) {}

void BpeModel::encode_uncached(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  bool missing = false;
  for (char c : piece) {
    int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    missing = missing || id < 0;
    symbols.push_back(id);
  }
  if (missing) {
    // Bytes without a vocabulary entry split the piece: BPE runs on the runs between them.
    size_t start = 0;
    for (size_t i = 0; i <= symbols.size(); ++i) {
      if (i < symbols.size() && symbols[i] >= 0) continue;
      std::vector<int32_t> run(symbols.begin() + static_cast<std::ptrdiff_t>(start),
                               symbols.begin() + static_cast<std::ptrdiff_t>(i));
      bpe_merge_scan(run, merges_);
      out.insert(out.end(), run.begin(), run.end());
      if (i < symbols.size() && unk_id_ >= 0) out.push_back(unk_id_);
      start = i + 1;
    }
    return;
  }
  if (symbols.size() <= 48) {
    bpe_merge_scan(symbols, merges_);
  } else {
    bpe_merge_heap(symbols, merges_);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {  // a single byte never merges
    int32_t id = byte_ids_[static_cast<uint8_t>(piece[0])];
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    }
    return;
  }
  if (piece.size() > kMaxCachedBytes) {
    encode_uncached(piece, out);
    return;
  }
  size_t h = std::hash<std::string_view>{}(piece);
  Shard& shard = cache_[h % kShards];
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.map.find(piece);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  encode_uncached(piece, out);
  std::vector<int32_t> ids(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= kShardCapacity) shard.map.clear();
  shard.map.emplace(std::string(piece), std::move(ids));
}

}  // namespace stoa
