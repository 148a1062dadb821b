// `stoa bench scale`: issue 17's end-to-end memory and time figures for one model shape. It
// makes the int8 model on disk (`stoa model init --dtype q8_0` as a child process: its peak RSS
// is its own), runs a real hub on loopback publishing its anchor (written tensor by tensor),
// starts a real worker process (`stoa work`) that loads the anchor and generates, makes one
// PULSE version from a simulated AdamW step tensor by tensor (pulse/version_maker.h) and
// publishes it as a patch the worker applies, then downloads the anchor again through a proxy
// that cuts the connection every N MB (resumed with HTTP Range).
//
// Phases of the worker, as the worker itself reports them: anchor_load = from its start to its
// log line "generating with version 1 (anchor)" (join, download, verify, decode, engine build);
// generate = from then until the hub holds its first complete group; patch_apply = from the
// patch's publication to "generating with version 2" (fetch, verify, apply, the next decode
// step boundary). peak_rss_bytes is the worker's VmHWM when it rose during the phase, else the
// largest VmRSS sampled (every 20 ms) in it.
#pragma once
#include <string>

namespace stoa::bench {

struct ScaleBenchOptions {
  std::string preset = "lfm2-8b-a1b";
  int layers = 0;           // > 0: only the preset's first layers (CI-sized runs, a cut)
  std::string workdir;      // model, blobs, spools (default ./.stoa-bench-scale-<random>)
  bool keep = false;        // keep the work directory (else removed, multi-GB files included)
  int threads = 2;          // the worker's engine threads
  int tokens = 16;          // new tokens per rollout
  double lr = 2e-6;         // the simulated AdamW step
  double cut_mb = 64;       // the proxy cuts each connection after this many MB
  double timeout_s = 7200;  // per waited-for event
  bool worker = true;       // false: no worker (its phases are null): the trainer side only
  bool json = false;
};

// Prints the report (JSON with the json option); returns the exit status.
int run_scale_bench(const ScaleBenchOptions& options);

}  // namespace stoa::bench
