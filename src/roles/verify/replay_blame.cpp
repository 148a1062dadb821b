#include "roles/verify/replay_blame.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "engine/sequence.h"
#include "engine/stage_digests.h"

namespace stoa::verify {
namespace {

// Sets a runner's layer observer for one pass and takes it off again, even when the pass throws:
// the runner outlives the blame pass (the replay keeps it for the next rollout).
class ObserverScope {
 public:
  ObserverScope(engine::ModelRunner& runner, const engine::LayerObserver& observer)
      : runner_(runner) {
    runner_.set_layer_observer(observer);
  }
  ~ObserverScope() { runner_.set_layer_observer({}); }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;

 private:
  engine::ModelRunner& runner_;
};

}  // namespace

std::optional<ReplayPositions> replay_positions(const net::RolloutSubmission& r,
                                                size_t prompt_length) {
  const size_t n = r.tokens.size();
  ReplayPositions at;
  at.prompt_length = prompt_length;
  at.first_gen = prompt_length;
  while (at.first_gen < n && !r.mask[at.first_gen]) ++at.first_gen;
  for (size_t t = prompt_length; t < n; ++t)
    if (r.mask[t]) at.last_gen = t;
  if (at.first_gen >= n || prompt_length == 0) return std::nullopt;
  // fed_version[j]: the version of the pass that fed token j — the pass that drew the next
  // generated token.
  at.fed_version.assign(n, 0);
  uint64_t next = r.versions[at.last_gen];
  for (size_t j = at.last_gen; j-- > 0;) {
    if (r.mask[j + 1]) next = r.versions[j + 1];
    at.fed_version[j] = next;
  }
  at.prompt_version = r.prompt_version.value_or(r.versions[at.first_gen]);
  return at;
}

ReplayedDigests replay_stage_digests(const net::RolloutSubmission& r, const ReplayPositions& at,
                                     std::span<const int64_t> end_layers,
                                     const BlameSampling& sampling,
                                     const CpuRunnerFor& runner_for) {
  STOA_CHECK(r.seed.has_value(), ErrorKind::kInvalidArgument,
             "the blame pass needs the rollout's seed");
  std::vector<Sha256> boundary(end_layers.size());
  Sha256 draws;
  ReplayedDigests out;

  // The version the piece in flight was computed under (a piece never spans two).
  uint64_t piece_version = 0;
  int64_t hidden = 0;
  const engine::LayerObserver observer = [&](int64_t layers_done, std::span<const float> rows) {
    const auto it = std::find(end_layers.begin(), end_layers.end(), layers_done);
    if (it == end_layers.end()) return;
    Sha256& h = boundary[static_cast<size_t>(it - end_layers.begin())];
    for (size_t t = 0; t * static_cast<size_t>(hidden) < rows.size(); ++t)
      engine::hash_row(h, piece_version,
                       rows.subspan(t * static_cast<size_t>(hidden), static_cast<size_t>(hidden)));
  };

  std::optional<engine::Sequence> seq;  // made by the first pass's runner
  const std::span<const int32_t> tokens(r.tokens);
  // Feeds tokens [a, b) under `version`; with `draw`, draws positions a + 1 .. b as an honest last
  // stage does (engine::sample_requests: the row cut to the sample vocabulary, the positional
  // uniform, sample_with_uniform).
  auto feed = [&](size_t a, size_t b, uint64_t version, bool draw) {
    engine::ModelRunner& runner = runner_for(version);
    if (!seq) {
      hidden = runner.config().hidden_size;
      seq.emplace(runner.new_sequence(static_cast<int64_t>(r.tokens.size()) + 1));
    }
    piece_version = version;
    const engine::SequenceInput input{&*seq, tokens.subspan(a, b - a),
                                      draw ? engine::Logits::kAll : engine::Logits::kNone};
    const ObserverScope scope(runner, observer);
    const engine::PassLogits logits = runner.append_batch_view({&input, 1});
    out.rows += static_cast<int64_t>(b - a);
    if (!draw) return;
    const std::span<const float> all = logits.rows(0);
    const int64_t V = runner.config().vocab_size;
    const int64_t sv = sampling.sample_vocab > 0 ? std::min<int64_t>(V, sampling.sample_vocab) : V;
    for (size_t row = 0; row < b - a; ++row) {
      const size_t p = a + row + 1;
      const std::span<const float> z =
          all.subspan(row * static_cast<size_t>(V), static_cast<size_t>(sv));
      const engine::SampledToken t =
          engine::sample_with_uniform(z, sampling.params, engine::positional_uniform(*r.seed, p));
      engine::hash_draw(draws, r.versions[p], t);
      ++out.draws;
    }
  };

  // The same passes as the model check (replay_validator.cpp), cut the same way: the pieces do
  // not change the bits (the engine is prefill/decode invariant), only which rows need logits.
  if (at.prompt_length > 1) feed(0, at.prompt_length - 1, at.prompt_version, false);
  for (size_t a = at.prompt_length - 1; a < at.last_gen;) {
    const uint64_t v = at.fed_version[a];
    const bool generated_next = r.mask[a + 1] != 0;
    size_t b = a;
    while (b < at.last_gen && at.fed_version[b] == v && (r.mask[b + 1] != 0) == generated_next) ++b;
    feed(a, b, v, generated_next);
    a = b;
  }
  for (const Sha256& h : boundary) out.boundary.push_back(h.digest());
  out.draws_out = draws.digest();
  return out;
}

Blame blame_stage(const net::RolloutSubmission& r, size_t prompt_length, int64_t num_layers,
                  const BlameSampling& sampling, const CpuRunnerFor& runner_for) {
  const std::span<const StageCommitment> chain(r.stage_commitments);
  if (chain.empty()) return {};
  int faulty = 0;
  if (const std::string fault = chain_fault(chain, num_layers, &faulty); !fault.empty())
    return {0, cat("the head submitted a broken chain of commitments: ", fault)};
  const std::optional<ReplayPositions> at = replay_positions(r, prompt_length);
  if (!at || !r.seed) return {};
  int64_t generated = 0;
  for (size_t p = at->first_gen; p <= at->last_gen; ++p) generated += r.mask[p] ? 1 : 0;
  const StageCommitment& last = chain.back();
  if (chain.front().rows != static_cast<int64_t>(at->last_gen) || last.draws != generated)
    return {0, cat("the stages committed to ", chain.front().rows, " rows and ", last.draws,
                   " draws, the rollout feeds ", at->last_gen, " and draws ", generated)};

  std::vector<int64_t> end_layers;
  for (size_t s = 0; s + 1 < chain.size(); ++s) end_layers.push_back(chain[s].end_layer);
  const ReplayedDigests replayed = replay_stage_digests(r, *at, end_layers, sampling, runner_for);
  for (size_t s = 0; s + 1 < chain.size(); ++s) {
    if (chain[s].out != replayed.boundary[s])
      return {static_cast<int>(s), cat("stage ", s, " (its rows at layer ", chain[s].end_layer,
                                       " differ from the replay's)")};
  }
  const int k = static_cast<int>(chain.size());
  if (last.out != replayed.draws_out)
    return {k - 1, cat("stage ", k - 1, " (its draws differ from the replay's)")};
  return {0,
          "stage 0 (every stage committed to the replay's rows and draws: the head submitted "
          "something else)"};
}

}  // namespace stoa::verify
