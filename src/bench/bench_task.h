// The made-up task the hub benches serve (`stoa bench hub`, `scale`, `sybil`): a two-abstract
// BM25 index under <dir>/index, the search task over it, a byte-level codec, a blob store under
// <dir>/blobs, and `prompts` questions ("What does Borvex treat? (i)", answer "migraine") — what a
// hub needs to lease, score and store, with nothing a bench measures depending on it.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "env/dataset.h"
#include "env/tasks/search/bm25_index.h"
#include "env/tasks/search/search_task.h"
#include "env/token_codec.h"
#include "pulse/blob_store.h"
#include "roles/hub/hub.h"

namespace stoa::bench {

class BenchTask {
 public:
  BenchTask(const std::filesystem::path& dir, int prompts)
      : index_(built_index(dir)), task_(index_), store_((dir / "blobs").string()) {
    for (int i = 0; i < prompts; ++i) {
      env::QaItem item;
      item.id = "q" + std::to_string(i);
      item.question = "What does Borvex treat? (" + std::to_string(i) + ")";
      item.golden_answers = {"migraine"};
      item.answer = "migraine";
      item.split = "train";
      prompts_.push_back(item);
    }
  }
  // The hub's dependencies on it (`vocab_size`: the model's; 256 for byte-level rollouts).
  hub::HubDeps deps(int64_t vocab_size = 256) {
    hub::HubDeps d;
    d.task = &task_;
    d.codec = &codec_;
    d.vocab_size = vocab_size;
    d.prompts = prompts_;
    d.store = &store_;
    return d;
  }
  const env::ByteCodec& codec() const { return codec_; }
  pulse::BlobStore& store() { return store_; }

 private:
  static std::string built_index(const std::filesystem::path& dir) {
    const std::string path = (dir / "index").string();
    env::build_bm25_index(
        std::vector<env::CorpusDoc>{{"d1", "Borvex\nBorvex treats migraine."},
                                    {"d2", "Kalumin\nKalumin is made by Zentra."}},
        path);
    return path;
  }

  env::Bm25Index index_;
  env::SearchTask task_;
  env::ByteCodec codec_;
  pulse::BlobStore store_;
  std::vector<env::QaItem> prompts_;
};

}  // namespace stoa::bench
