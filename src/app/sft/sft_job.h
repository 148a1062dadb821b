// `stoa train --sft`: supervised warm start on JSONL transcripts (format: src/train/sft_data.h).
// Reads a Hugging Face model directory, trains with AdamW on the masked tokens, writes the
// trained model directory (plus the tokenizer files) and, optionally, an exact checkpoint after
// every epoch that `resume` continues from.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "train/distributed.h"
#include "train/lora.h"

namespace stoa::app {

struct SftJobOptions {
  std::string data, model, out, checkpoint, resume;
  // Every `snapshot_every` steps a complete model directory <out>-snapshots/step-<N> (announced
  // on stdout), so an orchestrator can evaluate the SFT while it runs and stop it early.
  int64_t snapshot_every = 0;
  int epochs = 1;
  int64_t batch_tokens = 4096;
  int64_t micro_batch_tokens = 4096;
  double lr = 1e-5, weight_decay = 0.0, max_grad_norm = 1.0;
  int64_t warmup = 0;
  std::string schedule = "constant";
  std::string device = "cpu", dtype = "f32";
  // zero1, or fsdp: each rank keeps 1/N of the masters, gradients and moments, and the start
  // model is streamed from its directory into the shards (no whole f32 copy on any rank).
  std::string sharding = "zero1";
  int threads = 0;
  uint64_t seed = 0;
  // LoRA (train/lora.h) when lora.rank > 0: the start model frozen, adapters trained; the
  // checkpoint holds the adapters and resumes on --model.
  train::LoraOptions lora;
  std::string lora_base_dtype = "bf16";
  bool json = false;
  std::shared_ptr<train::Communicator> ranks;  // rank 0 of a data-parallel trainer, or null
};

// Exit status 0; errors throw stoa::Error.
int run_sft_job(const SftJobOptions& options);

}  // namespace stoa::app
