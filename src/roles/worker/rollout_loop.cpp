#include "roles/worker/rollout_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "engine/model_runner.h"
#include "engine/pipeline_backend.h"
#include "env/episode.h"
#include "kernels/targets.h"
#include "roles/episode/episode_runner.h"
#include "roles/episode/topk_row.h"
#include "roles/worker/engine_update.h"
#include "roles/worker/micro_batch.h"
#include "roles/worker/micro_batch_threads.h"
#include "roles/worker/rollout_record.h"
#include "roles/worker/stage_worker.h"

namespace stoa::worker {
namespace {
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

class RolloutLoop {
 public:
  RolloutLoop(const RolloutContext& c, WeightSync& sync, net::HubClient& hub, LeaseBook& book,
              RolloutStreamer& streamer, WorkerGauges& gauges, WorkerStats& stats)
      : c_(c),
        o_(c.options),
        sync_(sync),
        hub_(hub),
        book_(book),
        streamer_(streamer),
        gauges_(gauges),
        stats_(stats),
        max_tokens_(c.joined.max_tokens > 0 ? c.joined.max_tokens : 4096),
        batches_(micro_batch_count(c.options)) {
    const int64_t m = static_cast<int64_t>(batches_.size());
    for (int64_t i = 0; i < m; ++i)
      batches_[static_cast<size_t>(i)].slots = o_.slots / m + (i < o_.slots % m ? 1 : 0);
    if (m > 1)
      threads_ = std::make_unique<MicroBatchThreads>(
          batches_.size(), [this](size_t i) { serve_and_step(batches_[i]); });
  }

  // The engine's weights may be the sync's one copy (EngineStore): the sync stops reading them
  // before the runner that owns them goes (the micro-batches' threads are stopped first).
  ~RolloutLoop() {
    threads_.reset();
    sync_.detach_engine();
  }
  RolloutLoop(const RolloutLoop&) = delete;
  RolloutLoop& operator=(const RolloutLoop&) = delete;

  void run(const std::atomic<bool>& stop);

 private:
  void take_weights();
  void make_runners();
  // A pipeline group's head (stage_worker.h): links to stage 1 once its weights are here, and
  // again after a break; false while the stages cannot be reached.
  bool connect_pipeline();
  // The stages compute with the head's version: false while one of them is ahead (the head
  // catches up at its next take_weights).
  bool bring_stages_along();
  // A stage died, stalled or refused: the rollouts in progress go back to the hub (their leases
  // released, so another worker or this group later generates them afresh: nothing submitted
  // twice) and the group reconnects.
  void recover_pipeline(const std::string& reason);
  // With state_mu_ held (the book, the leasing, the counters are shared by the micro-batches).
  void drop_cancelled(MicroBatch& b);
  void fill_slots(MicroBatch& b);
  // False when the task could not render the prompt (the lease was given back).
  bool start_sample(MicroBatch& b, const std::shared_ptr<LeaseWork>& w);
  void drop_prompts(MicroBatch& b);
  void on_token(MicroBatch& b, int64_t id, const engine::SampledToken& t);
  void on_turn(MicroBatch& b, int64_t id, const env::Decision& d);
  void on_end(MicroBatch& b, episode::FinishedEpisode&& f);
  bool have_runners() const { return batches_.front().runner != nullptr; }
  int64_t running() const {
    int64_t n = 0;
    for (const MicroBatch& b : batches_) n += b.running;
    return n;
  }
  bool stop_due(const std::atomic<bool>& stop, Clock::time_point t_start) const;
  // A micro-batch's thread, over and over between two safe points: its slots served, then one
  // step of its runner (a pass down the chain while the other micro-batches' are too).
  void serve_and_step(MicroBatch& b);
  // The micro-batches run on their threads until a safe point is due (new weights, a stop, a
  // failure); rethrows the first micro-batch's failure.
  void run_micro_batches(const std::atomic<bool>& stop, Clock::time_point t_start,
                         Clock::time_point drain_deadline);
  void note_in_flight();
  // Under the pass lock: the engine still holds engine_version_, the version every token of the
  // next pass is recorded under (an anchor written in place since must be taken first).
  bool engine_current() const { return sync_.engine_holds(engine_version_); }

  const RolloutContext& c_;
  const WorkerOptions& o_;
  WeightSync& sync_;
  net::HubClient& hub_;
  LeaseBook& book_;
  RolloutStreamer& streamer_;
  WorkerGauges& gauges_;
  WorkerStats& stats_;
  const int64_t max_tokens_;
  std::unique_ptr<engine::EngineBackend> model_;  // the CPU engine, or a pipeline group's head
  engine::PipelineBackend* pipeline_ = nullptr;   // model_, when this worker heads a group
  std::unique_ptr<engine::EngineWeights> head_weights_;  // until stage 1 answers
  bool stages_current_ = false;                          // the stages compute with engine_version_
  Clock::time_point next_connect_ = Clock::now();
  uint64_t engine_version_ = 0;  // changes only at a safe point (no micro-batch stepping)
  std::vector<MicroBatch> batches_;
  // Across micro-batches: picking and starting samples, the leasing, the seeder (state_mu_);
  // the finished count (stats_mu_: a rollout ends in a step, while another micro-batch may hold
  // state_mu_ opening sequences).
  std::mutex state_mu_;
  std::mutex stats_mu_;
  Rng seeder_{o_.seed ? o_.seed : static_cast<uint64_t>(unix_ms()), 0};
  Clock::time_point next_lease_ = Clock::now();
  std::atomic<bool> draining_{false};
  int64_t peak_logged_ = 1;
  // Last: stopped and joined before the micro-batches they step go.
  std::unique_ptr<MicroBatchThreads> threads_;
};

// Safe point: no pass is running, so the weights may change under every sequence.
void RolloutLoop::take_weights() {
  // With the engine as the sync's one copy (EngineStore) the update is already in the engine
  // when take_update returns, and the first one hands over the weights built from the anchor.
  // Otherwise patches scatter into the engine in place and an anchor comes as tensors.
  auto update = sync_.take_update(UpdateForm::kPatches);
  if (!update) return;
  const auto t_apply = Clock::now();
  if (!model_ && !head_weights_) {
    std::unique_ptr<engine::EngineWeights> weights =
        update->engine ? std::move(update->engine)
                       : std::make_unique<engine::EngineWeights>(
                             engine_weights_from_update(c_.config, *update));
    if (o_.stages > 1) {
      head_weights_ = std::move(weights);  // the group's engine once stage 1 answers
    } else {
      // The weights stay the sync's copy, which it reads to verify the next patches; a device
      // backend re-lays them as it takes them (Linear::hold_grid), so the sync waits meanwhile.
      const auto building = sync_.exclusive_lock();
      gpu::ChosenBackend chosen = gpu::make_engine_backend(o_.backend, std::move(weights), c_.pool);
      model_ = std::move(chosen.backend);
      log_info("worker", chosen.note);
      if (o_.progress) std::printf("%s\n", chosen.note.c_str());
      make_runners();
    }
  } else if (!model_) {
    apply_update(*head_weights_, *update);
  } else {
    {
      // A device backend copies what the update wrote (weights_written): no anchor is written
      // in place meanwhile (one that lands after is taken first: engine_current()).
      const auto reading = sync_.pass_lock();
      apply_update(*model_, *update);
    }
    // A sample started from now on computes its prompt with these weights, as it would without
    // prompt sharing: the kept prompts are recomputed at the next start (samples already
    // waiting for one fork it after the next pass, under these weights too).
    for (MicroBatch& b : batches_) {
      for (const HeldPrompt& p : b.prompts) b.runner->drop_prompt(p.id);
      b.prompts.clear();
    }
  }
  engine_version_ = update->version;
  stages_current_ = false;
  gauges_.engine_version = engine_version_;
  gauges_.have_engine = true;
  ++stats_.weight_switches;
  log_info("worker", "generating with version ", engine_version_, update->full ? " (anchor)" : "");
  if (gauges_.on_weights) gauges_.on_weights(engine_version_, update->full, ms_since(t_apply));
}

void RolloutLoop::make_runners() {
  for (MicroBatch& b : batches_) {
    episode::RunnerLimits limits;
    limits.slots = b.slots;
    limits.capacity = max_tokens_;
    limits.max_tokens = max_tokens_;
    limits.sample_vocab = c_.sample_vocab;
    if (c_.config.eos_token_id >= 0)
      limits.stop_tokens = {static_cast<int32_t>(c_.config.eos_token_id)};
    limits.preallocate = false;  // a rollout's cache grows with its transcript
    episode::RunnerHooks hooks;
    hooks.on_token = [this, &b](int64_t id, const engine::SampledToken& t) { on_token(b, id, t); };
    hooks.on_turn = [this, &b](int64_t id, const env::Episode&, const env::Decision& d) {
      on_turn(b, id, d);
    };
    hooks.on_end = [this, &b](episode::FinishedEpisode&& f) { on_end(b, std::move(f)); };
    b.runner = std::make_unique<episode::EpisodeRunner>(*model_, c_.codec, std::move(limits),
                                                        std::move(hooks));
    b.samples.clear();
    b.samples.resize(static_cast<size_t>(b.slots));
    b.prompts.clear();
    b.running = 0;
  }
}

bool RolloutLoop::connect_pipeline() {
  if (have_runners()) return true;
  if ((!head_weights_ && !pipeline_) || Clock::now() < next_connect_) return false;
  try {
    std::unique_ptr<engine::StageLink> link = link_to_next_stage(o_);
    if (pipeline_) {
      pipeline_->reconnect(std::move(link));
    } else {
      auto head = std::make_unique<engine::PipelineBackend>(std::move(head_weights_),
                                                            std::move(link), c_.pool);
      if (o_.stage_commit_key)  // none: a group formed by hand
        head->set_commit_key(o_.pipeline_group, *o_.stage_commit_key, o_.stage_keys);
      pipeline_ = head.get();
      model_ = std::move(head);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kNetwork) throw;
    log_warn("worker", "stage 1 at ", o_.stage_next, " cannot be reached (", e.what(),
             "): trying again in 2 s");
    next_connect_ = Clock::now() + 2s;
    return false;
  }
  stages_current_ = false;
  make_runners();
  log_info("worker", "heading a pipeline group of ", o_.stages, " stages (stage 1 at ",
           o_.stage_next, "), ", batches_.size(), " micro-batches in flight");
  return true;
}

bool RolloutLoop::bring_stages_along() {
  const uint64_t held = pipeline_->use_weights(engine_version_);
  if (held == engine_version_) return stages_current_ = true;
  log_info("worker", "the group's stages hold version ", held, ", the head ", engine_version_,
           ": the head catches up first");
  return false;
}

void RolloutLoop::recover_pipeline(const std::string& reason) {
  log_warn("worker", "the pipeline group broke (", reason,
           "): its rollouts in progress go back to the hub, and the group reconnects");
  // Told to the hub with the next ask: a group that keeps breaking goes. A stage whose anchor
  // moved it past the head refuses the next pass by design (the head switches and goes on):
  // no fault of anyone's.
  if (o_.group_health && reason.find("an anchor replaced them") == std::string::npos) {
    o_.group_health->fault_stage = stage_named_in(reason, c_.config, o_.stages);
    ++o_.group_health->breaks;
  }
  std::vector<std::string> released;
  for (const auto& w : book_.unfinished()) {
    released.push_back(w->lease.lease_id);
    try {
      hub_.release(w->lease.lease_id);
      ++stats_.leases_released;
    } catch (const std::exception& e) {
      log_warn("worker", "release ", w->lease.lease_id, ": ", e.what());
    }
  }
  book_.mark_cancelled(released);
  for (MicroBatch& b : batches_) {
    b.runner.reset();  // its sequences on the stages went with the broken session
    for (Sample& sample : b.samples) {
      if (sample.work) book_.ended(*sample.work);
      sample = Sample{};
    }
    b.prompts.clear();
    b.running = 0;
  }
  stages_current_ = false;
  next_connect_ = Clock::now() + 1s;
}

// Drops cancelled groups' rollouts and prompts (the group is complete or closed: nothing to add).
void RolloutLoop::drop_cancelled(MicroBatch& b) {
  for (size_t id = 0; id < b.samples.size(); ++id) {
    Sample& s = b.samples[id];
    if (!s.work || !book_.cancelled(*s.work)) continue;
    b.runner->cancel(static_cast<int64_t>(id));
    book_.ended(*s.work);
    s = Sample{};
  }
  drop_prompts(b);
  b.running = b.runner->running();
}

// A prompt goes once its group is cancelled or every sample of it started (here or in another
// micro-batch, which held a prompt of its own).
void RolloutLoop::drop_prompts(MicroBatch& b) {
  std::erase_if(b.prompts, [&](const HeldPrompt& p) {
    if (!book_.cancelled(*p.work) && p.work->to_start > 0) return false;
    b.runner->drop_prompt(p.id);
    return true;
  });
}

// Fills free slots: samples of leases we hold first, then a new lease.
void RolloutLoop::fill_slots(MicroBatch& b) {
  while (b.runner->free_slots() > 0) {
    std::shared_ptr<LeaseWork> w = book_.next_to_start();
    if (!w && Clock::now() >= next_lease_) {
      int64_t retry_after_ms = 0;
      w = lease_group(hub_, max_tokens_, &retry_after_ms, gauges_.hub, gauges_.run_ended);
      if (w) {
        ++stats_.leases;
        book_.add(w);
      } else {
        next_lease_ =
            Clock::now() + std::chrono::milliseconds(std::max<int64_t>(50, retry_after_ms));
      }
    }
    if (!w) break;
    if (!start_sample(b, w)) {
      // The task is failing: ask for work again later rather than spin on lease and release.
      next_lease_ = Clock::now() + std::chrono::seconds(2);
      break;
    }
  }
}

bool RolloutLoop::start_sample(MicroBatch& b, const std::shared_ptr<LeaseWork>& w) {
  const net::SamplingParams& ls = w->lease.sampling;
  env::EpisodeConfig ec;
  ec.max_turns = ls.max_turns;
  ec.max_observation_tokens = ls.max_observation_tokens;
  std::unique_ptr<env::Episode> ep;
  try {
    ep = std::make_unique<env::Episode>(c_.task, w->problem, c_.codec, ec);
  } catch (const env::EnvironmentError& e) {
    // The prompt could not be rendered (the task's server, or the hub serving the task, failed):
    // the group goes back to the hub for another worker or a later try.
    log_warn("worker", "lease ", w->lease.lease_id, " given back: the task failed: ", e.what());
    book_.mark_cancelled({w->lease.lease_id});
    try {
      hub_.release(w->lease.lease_id);
    } catch (const std::exception& released) {
      log_warn("worker", "release ", w->lease.lease_id, ": ", released.what());
    }
    return false;
  }
  STOA_CHECK(ep->tokens() == w->lease.prompt_tokens, ErrorKind::kInvalidArgument, "lease ",
             w->lease.lease_id, ": the hub's prompt (", w->lease.prompt_tokens.size(),
             " tokens) differs from this worker's rendering (", ep->tokens().size(),
             ") — is --model the run's tokenizer?");
  Sample s;
  s.work = w;
  s.record = std::make_unique<RolloutRecord>(w->lease, c_.joined.worker_id, c_.joined.topk);
  episode::EpisodeSampling es;
  es.params.temperature = ls.temperature;
  es.params.top_p = ls.top_p;
  es.params.top_k = ls.top_k;
  es.params.top_logprobs = c_.joined.topk;
  // The hub's seed for this sample (the k-th started of the lease) makes the rollout replayable
  // (positional draws); a hub that sends none gets the worker's own stream draws.
  const size_t k = static_cast<size_t>(w->lease.samples - w->to_start);
  std::optional<uint64_t> lease_seed;
  if (k < w->lease.seeds.size()) lease_seed = w->lease.seeds[k];
  es.seed = lease_seed ? *lease_seed : seeder_.next();
  es.draw = lease_seed ? engine::DrawMode::kPositional : engine::DrawMode::kStream;
  es.max_new_tokens = ls.max_new_tokens;
  // The prompt's KV is computed under the weights held now: a prompt kept from before a switch
  // was dropped in take_weights, and no switch happens between here and the next step.
  // What computed it: the kernel target, or the GPU backend (the same bits either way).
  const std::string computed_on = std::strcmp(model_->backend_name(), "vulkan") == 0
                                      ? "vulkan"
                                      : kernels::target_name(kernels::active_target());
  s.record->set_replay_info(lease_seed, computed_on, engine_version_);
  // The group's prompt is prefilled once per micro-batch; every sample there forks it.
  auto held = std::find_if(b.prompts.begin(), b.prompts.end(),
                           [&](const HeldPrompt& p) { return p.work == w; });
  if (held == b.prompts.end())
    held = b.prompts.insert(b.prompts.end(),
                            HeldPrompt{w, b.runner->add_prompt(w->lease.prompt_tokens)});
  s.started = Clock::now();
  s.started_unix_ms = unix_ms();
  const int64_t id = b.runner->start(std::move(ep), held->id, es);
  b.samples[static_cast<size_t>(id)] = std::move(s);
  book_.started(*w);
  drop_prompts(b);
  b.running = b.runner->running();
  return true;
}

void RolloutLoop::on_token(MicroBatch& b, int64_t id, const engine::SampledToken& t) {
  Sample& s = b.samples[static_cast<size_t>(id)];
  std::vector<int32_t> ids;
  std::vector<float> lps;
  if (c_.joined.topk > 0) episode::topk_row(t, c_.joined.topk, ids, lps);
  s.record->add_generated(t.token, t.logprob, engine_version_, ids, lps);
  ++gauges_.tokens_generated;
}

void RolloutLoop::on_turn(MicroBatch& b, int64_t id, const env::Decision& d) {
  if (!d.done) b.samples[static_cast<size_t>(id)].record->add_observation(d.appended);
}

void RolloutLoop::on_end(MicroBatch& b, episode::FinishedEpisode&& f) {
  Sample& s = b.samples[static_cast<size_t>(f.id)];
  if (f.end == episode::EpisodeEnd::kTaskFailed) {
    // Nothing to submit: the hub re-issues the missing sample once the lease ends.
    log_warn("worker", "a rollout of lease ", s.work->lease.lease_id,
             " was given up: the task failed: ", f.failure);
    book_.ended(*s.work);
    s = Sample{};
    return;
  }
  // Out of transcript budget: submitted truncated, without an answer.
  const bool answered =
      f.end == episode::EpisodeEnd::kDone && f.last.action == env::ActionKind::kAnswer;
  if (s.record->tokens().size() > static_cast<size_t>(max_tokens_))
    s.record->truncate(static_cast<size_t>(max_tokens_));
  s.record->set_answer(answered ? f.last.content : "");
  s.record->set_turns(f.episode->turns());
  net::RolloutTimings t;
  t.tool_ms = f.tool_ms;
  t.generate_ms = ms_since(s.started) - f.tool_ms;
  t.started_unix_ms = s.started_unix_ms;
  t.finished_unix_ms = unix_ms();
  s.record->set_timings(t);
  if (f.proof.group_id != 0) s.record->set_pipeline_proof(std::move(f.proof));
  const bool exact = s.record->tokens().size() == f.episode->tokens().size();
  if (s.record->generated() > 0)
    streamer_.push(s.record->finish(exact ? &f.episode->tokens() : nullptr));
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.rollouts_finished;
  }
  book_.ended(*s.work);
  s = Sample{};
}

bool RolloutLoop::stop_due(const std::atomic<bool>& stop, Clock::time_point t_start) const {
  return stop ||
         (o_.max_minutes > 0 &&
          std::chrono::duration<double>(Clock::now() - t_start).count() > o_.max_minutes * 60);
}

void RolloutLoop::serve_and_step(MicroBatch& b) {
  {
    // Opening a group's sequences talks to the stages: the other micro-batches' passes go on
    // meanwhile (only their own refills wait for this lock).
    std::lock_guard<std::mutex> lock(state_mu_);
    drop_cancelled(b);
    if (!draining_) fill_slots(b);
  }
  if (b.running == 0) {
    std::this_thread::sleep_for(20ms);
    return;
  }
  bool stepped = false;
  {
    const auto pass = sync_.pass_lock();  // an anchor written in place waits for the pass
    // One that landed is taken first: the loop's thread pauses the micro-batches for it.
    stepped = engine_current();
    if (stepped) b.runner->step();
  }
  if (!stepped) std::this_thread::sleep_for(1ms);
  b.running = b.runner->running();
}

void RolloutLoop::run_micro_batches(const std::atomic<bool>& stop, Clock::time_point t_start,
                                    Clock::time_point drain_deadline) {
  threads_->resume();
  try {
    while (!threads_->failed()) {
      std::this_thread::sleep_for(10ms);
      note_in_flight();
      const int64_t active = running();
      gauges_.rollouts_running = active;
      {
        std::lock_guard<std::mutex> lock(state_mu_);  // no micro-batch between pick and start
        book_.forget_finished();
      }
      // A safe point is due: a stop, the end of the drain, the hub's word, or newer verified
      // weights — every micro-batch then switches together, so none mixes versions.
      if (!draining_ && stop_due(stop, t_start)) break;
      if (draining_ && (active == 0 || Clock::now() >= drain_deadline)) break;
      if (gauges_.run_ended || gauges_.fatal.get() || !sync_.engine_usable()) break;
      const std::optional<uint64_t> verified = sync_.version();
      if (verified && *verified != engine_version_) break;
      if (!engine_current()) break;  // an anchor was written in place
    }
  } catch (...) {
    threads_->pause();
    throw;
  }
  threads_->pause();
  note_in_flight();
  if (const std::exception_ptr e = threads_->error()) std::rethrow_exception(e);
}

void RolloutLoop::note_in_flight() {
  if (!pipeline_) return;
  const int64_t peak = pipeline_->peak_passes_in_flight();
  if (peak <= peak_logged_) return;
  peak_logged_ = peak;
  log_info("worker", "pipeline: ", peak, " micro-batches in flight at once (the most so far)");
}

void RolloutLoop::run(const std::atomic<bool>& stop) {
  const auto t_start = Clock::now();
  double idle_ms = 0;
  Clock::time_point drain_deadline;
  while (true) {
    if (!draining_ && stop_due(stop, t_start)) {
      draining_ = true;
      drain_deadline = Clock::now() + std::chrono::seconds(o_.shutdown_grace_s);
      log_info("worker", "stopping: finishing rollouts in progress (up to ", o_.shutdown_grace_s,
               " s)");
    }
    // A worker the hub quarantined, or whose weights are for another model, can do nothing
    // useful: stop it with the reason (progress_report.h words it for the volunteer).
    if (const auto fatal = gauges_.fatal.get()) fail(ErrorKind::kIntegrity, *fatal);
    if (!have_runners() && sync_.last_error().find("is for another model") != std::string::npos)
      fail(ErrorKind::kIntegrity, sync_.last_error());
    // The hub said the run is over: nothing is left to lease, and what is running would train
    // nothing; generate_rollouts stops without handing anything over.
    if (gauges_.run_ended) break;
    take_weights();
    if (o_.stages > 1 && !draining_) connect_pipeline();
    try {
      // Opening a sequence talks to a group's stages. Micro-batches on threads fill their own
      // slots, together, once they run.
      if (have_runners()) {
        for (MicroBatch& b : batches_) {
          std::lock_guard<std::mutex> lock(state_mu_);
          drop_cancelled(b);
          if (!threads_ && !draining_) fill_slots(b);
        }
      }
    } catch (const std::exception& e) {
      if (!pipeline_ || !pipeline_->broken()) throw;
      recover_pipeline(e.what());
    }
    book_.forget_finished();
    const int64_t active = running();
    gauges_.rollouts_running = active;
    if (draining_ && (active == 0 || Clock::now() >= drain_deadline)) break;
    const bool threads_fill = threads_ && have_runners() && !draining_;
    if (active == 0 && !threads_fill) {
      const auto t0 = Clock::now();
      std::this_thread::sleep_for(have_runners() ? 50ms : 200ms);
      idle_ms += ms_since(t0);
      gauges_.idle_fraction = idle_ms / std::max(1.0, ms_since(t_start));
      continue;
    }
    if (!sync_.engine_usable()) {  // an anchor failed part-way: wait for the next one
      std::this_thread::sleep_for(50ms);
      continue;
    }
    try {
      if (pipeline_ && !stages_current_ && !bring_stages_along()) {
        std::this_thread::sleep_for(50ms);
        continue;
      }
      if (threads_) {
        run_micro_batches(stop, t_start, drain_deadline);
      } else {
        MicroBatch& b = batches_.front();
        const auto pass = sync_.pass_lock();  // an anchor written in place waits for the pass
        if (!engine_current()) continue;      // one did: take it before computing again
        b.runner->step();                     // one batched pass over every running rollout
        b.running = b.runner->running();
      }
    } catch (const std::exception& e) {
      if (!pipeline_ || !pipeline_->broken()) throw;
      recover_pipeline(e.what());
      continue;
    }
    gauges_.idle_fraction = idle_ms / std::max(1.0, ms_since(t_start));
  }
}

}  // namespace

void run_rollout_loop(const RolloutContext& context, WeightSync& sync, net::HubClient& hub,
                      LeaseBook& book, RolloutStreamer& streamer, WorkerGauges& gauges,
                      const std::atomic<bool>& stop, WorkerStats& stats) {
  RolloutLoop(context, sync, hub, book, streamer, gauges, stats).run(stop);
}

}  // namespace stoa::worker
