#include "roles/worker/worker.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "env/bm25_index.h"
#include "env/episode.h"
#include "env/retrieval_client.h"
#include "env/search_task.h"
#include "env/tokenizer_codec.h"
#include "model/tokenizer.h"
#include "net/hub_client.h"
#include "pulse/model_view.h"
#include "roles/worker/engine_update.h"
#include "roles/worker/rollout_record.h"
#include "roles/worker/rollout_streamer.h"
#include "roles/worker/weight_sync.h"

namespace stoa::worker {
namespace {
namespace fs = std::filesystem;
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

// One leased group: the lease, the problem its episodes refer to, and how many of its samples
// are still to start / running.
struct LeaseWork {
  net::Lease lease;
  env::QaItem problem;
  int to_start = 0;
  int running = 0;
  bool cancelled = false;
};

struct Slot {
  std::shared_ptr<LeaseWork> work;
  std::unique_ptr<env::Episode> episode;
  std::unique_ptr<RolloutRecord> record;
  std::unique_ptr<engine::Sequence> seq;
  std::unique_ptr<engine::Sampler> sampler;
  std::vector<int32_t> pending;  // appended at the next pass; its last token's logits are sampled
  std::vector<int32_t> turn;     // this turn's sampled tokens
  int64_t turn_budget = 0;
  double tool_ms = 0;
  Clock::time_point started;
  int64_t started_unix_ms = 0;
  bool active() const { return episode != nullptr; }
  void clear() { *this = Slot{}; }
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

WorkerStats run_worker(const WorkerOptions& o, const std::atomic<bool>& stop) {
  STOA_CHECK(!o.hub_url.empty(), ErrorKind::kInvalidArgument, "stoa work: --hub is required");
  STOA_CHECK(
      !o.model_dir.empty(), ErrorKind::kInvalidArgument,
      "stoa work: --model DIR (config.json + tokenizer.json of the run's model) is required");
  STOA_CHECK(o.index_dir.empty() != o.search_url.empty(), ErrorKind::kInvalidArgument,
             "stoa work: give exactly one of --index DIR and --search-url URL");
  STOA_CHECK(o.slots >= 1, ErrorKind::kInvalidArgument, "stoa work: --slots must be >= 1");

  const ModelConfig config = load_model_config(o.model_dir + "/config.json");
  // The same rule as `stoa run` (the hub renders prompts and decodes transcripts with it): the
  // model dir's tokenizer.json, else the byte-level codec. Sampling is restricted to the ids the
  // codec can decode — an embedding table padded past the tokenizer would otherwise produce
  // tokens the hub cannot decode and rejects (bad_token_id).
  std::unique_ptr<env::TokenCodec> codec_ptr;
  int64_t sample_vocab = config.vocab_size;
  const std::string tok_path = o.model_dir + "/tokenizer.json";
  if (fs::exists(tok_path)) {
    Tokenizer tok = Tokenizer::from_file(tok_path);
    sample_vocab = std::min<int64_t>(sample_vocab, tok.vocab_size());
    codec_ptr = std::make_unique<env::TokenizerCodec>(std::move(tok));
  } else {
    STOA_CHECK(config.vocab_size >= 256, ErrorKind::kBadFormat, "stoa work: ", o.model_dir,
               " has no tokenizer.json and a vocabulary under 256 (byte-level fallback)");
    sample_vocab = 256;
    codec_ptr = std::make_unique<env::ByteCodec>();
  }
  const env::TokenCodec& codec = *codec_ptr;
  std::unique_ptr<env::Retriever> retriever;
  if (!o.index_dir.empty())
    retriever = std::make_unique<env::Bm25Index>(o.index_dir);
  else
    retriever = std::make_unique<env::RetrievalClient>(o.search_url);
  const env::SearchTask task(*retriever);
  std::unique_ptr<ThreadPool> own_pool;
  if (o.threads > 0) own_pool = std::make_unique<ThreadPool>(o.threads);
  ThreadPool* pool = own_pool ? own_pool.get() : &ThreadPool::global();

  // ---- join (resuming the previous identity when the state dir has one) ----
  const std::string state_dir = o.state_dir.empty() ? (".stoa-worker-" + o.name) : o.state_dir;
  fs::create_directories(state_dir);
  const fs::path id_file = fs::path(state_dir) / "worker_id";
  net::HubClient hub(o.hub_url);
  net::JoinRequest join_req;
  join_req.name = o.name;
  join_req.threads = o.threads;
  if (fs::exists(id_file)) join_req.resume_id = read_text(id_file);
  // A worker started together with its hub (stoa demo, stoa bench fleet) may come up first, and
  // a hub restarting after a crash is briefly away: transport errors are retried with back-off
  // for join_timeout_s. A refusal (JoinRefused: wrong token) is final.
  const net::JoinResponse joined = [&] {
    const auto deadline = Clock::now() + std::chrono::seconds(o.join_timeout_s);
    for (int attempt = 0;; ++attempt) {
      try {
        return hub.join(o.join_token, join_req);
      } catch (const net::JoinRefused&) {
        throw;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kNetwork || stop || Clock::now() >= deadline) throw;
        log_warn("worker", "join: ", e.what(), "; retrying");
        const auto wait = std::chrono::milliseconds(std::min(5000, 250 << std::min(attempt, 5)));
        for (auto t = 0ms; t < wait && !stop && Clock::now() < deadline; t += 50ms)
          std::this_thread::sleep_for(50ms);
      }
    }
  }();
  { std::ofstream(id_file) << joined.worker_id << "\n"; }
  STOA_CHECK(joined.vocab_size == config.vocab_size, ErrorKind::kInvalidArgument,
             "stoa work: the hub's vocabulary has ", joined.vocab_size, " tokens, ", o.model_dir,
             " has ", config.vocab_size);
  log_info("worker", o.name, " joined as ", joined.worker_id,
           join_req.resume_id.empty() ? "" : " (resumed)");

  // ---- background threads ----
  HubBlobSource source(hub);
  WeightSync sync(source, pulse::config_hash(config));
  std::atomic<bool> threads_stop{false};
  std::atomic<int> threads_done{0};  // sync + heartbeat, for a bounded shutdown
  std::thread sync_thread([&] {
    int failures = 0;
    uint64_t failed_before = 0;
    while (!threads_stop) {
      try {
        // Short enough that a stopping worker is not held up long by its own long-poll.
        sync.step(std::chrono::seconds(5));
        failures = 0;
        // A sync that just failed (bad blobs) is not retried in a tight loop.
        const uint64_t failed = sync.counters().failed_syncs;
        if (failed != failed_before) std::this_thread::sleep_for(200ms);
        failed_before = failed;
      } catch (const std::exception& e) {
        log_warn("worker", "sync: ", e.what());
        const auto wait = std::min(10000, 250 << std::min(failures++, 6));
        for (int i = 0; i < wait / 50 && !threads_stop; ++i) std::this_thread::sleep_for(50ms);
      }
    }
    ++threads_done;
  });

  std::mutex work_mutex;  // guards the LeaseWork list (heartbeat thread reads and cancels)
  std::vector<std::shared_ptr<LeaseWork>> works;
  std::atomic<uint64_t> tokens_generated{0};
  std::atomic<uint64_t> engine_version_atomic{0};
  std::atomic<bool> have_engine{false};
  std::atomic<double> idle_fraction{0};
  std::thread heartbeat_thread([&] {
    const auto interval = std::chrono::seconds(std::max(1, joined.heartbeat_interval_s / 2));
    auto last_tokens = tokens_generated.load();
    auto last = Clock::now();
    while (!threads_stop) {
      for (auto waited = 0ms; waited < interval && !threads_stop; waited += 100ms)
        std::this_thread::sleep_for(100ms);
      if (threads_stop) break;
      net::Heartbeat hb;
      hb.worker_id = joined.worker_id;
      if (have_engine) hb.version = engine_version_atomic.load();
      {
        std::lock_guard lock(work_mutex);
        for (auto& w : works) hb.leases.push_back(w->lease.lease_id);
      }
      hb.tokens_generated = tokens_generated;
      const double secs = std::chrono::duration<double>(Clock::now() - last).count();
      hb.tokens_per_s = secs > 0 ? (hb.tokens_generated - last_tokens) / secs : 0;
      hb.idle_fraction = idle_fraction;
      last_tokens = hb.tokens_generated;
      last = Clock::now();
      try {
        net::HeartbeatResponse r = hub.heartbeat(hb);
        std::lock_guard lock(work_mutex);
        for (const std::string& id : r.cancelled)
          for (auto& w : works)
            if (w->lease.lease_id == id) w->cancelled = true;
      } catch (const std::exception& e) {
        log_warn("worker", "heartbeat: ", e.what());
      }
    }
    ++threads_done;
  });

  RolloutStreamer streamer([&](const net::RolloutSubmission& r) { return hub.submit(r); },
                           (fs::path(state_dir) / "spool").string());

  // ---- generation ----
  WorkerStats stats;
  std::unique_ptr<engine::ModelRunner> runner;
  uint64_t engine_version = 0;
  std::vector<Slot> slots(static_cast<size_t>(o.slots));
  Rng seeder(o.seed ? o.seed : static_cast<uint64_t>(unix_ms()),
             0);  // one sampler seed per rollout
  const auto t_start = Clock::now();
  auto next_lease = Clock::now();
  double idle_ms = 0;
  bool draining = false;
  Clock::time_point drain_deadline;
  const int64_t max_tokens = joined.max_tokens > 0 ? joined.max_tokens : 4096;

  auto finish_slot = [&](Slot& s, const std::string& answer) {
    if (s.record->tokens().size() > static_cast<size_t>(max_tokens))
      s.record->truncate(static_cast<size_t>(max_tokens));
    s.record->set_answer(answer);
    s.record->set_turns(s.episode->turns());
    net::RolloutTimings t;
    t.tool_ms = s.tool_ms;
    t.generate_ms = ms_since(s.started) - s.tool_ms;
    t.started_unix_ms = s.started_unix_ms;
    t.finished_unix_ms = unix_ms();
    s.record->set_timings(t);
    const bool exact = s.record->tokens().size() == s.episode->tokens().size();
    if (s.record->generated() > 0)
      streamer.push(s.record->finish(exact ? &s.episode->tokens() : nullptr));
    ++stats.rollouts_finished;
    {
      std::lock_guard lock(work_mutex);
      --s.work->running;
    }
    s.clear();
  };

  auto end_turn = [&](Slot& s) {
    const auto t0 = Clock::now();
    env::Decision d = s.episode->step(s.turn);
    s.tool_ms += ms_since(t0);
    // The last sampled token is not in the sequence yet: it goes in with the observation.
    std::vector<int32_t> next = {s.turn.back()};
    s.turn.clear();
    if (d.done) return finish_slot(s, d.action == env::ActionKind::kAnswer ? d.content : "");
    s.record->add_observation(d.appended);
    next.insert(next.end(), d.appended.begin(), d.appended.end());
    const int64_t room = max_tokens - static_cast<int64_t>(s.episode->tokens().size());
    if (room <= 0) return finish_slot(s, "");  // out of transcript budget: submitted truncated
    s.pending = std::move(next);
    s.turn_budget = std::min<int64_t>(s.work->lease.sampling.max_new_tokens, room);
  };

  auto start_slot = [&](Slot& s, const std::shared_ptr<LeaseWork>& w) {
    env::EpisodeConfig ec;
    ec.max_turns = w->lease.sampling.max_turns;
    ec.max_observation_tokens = w->lease.sampling.max_observation_tokens;
    s.work = w;
    s.episode = std::make_unique<env::Episode>(task, w->problem, codec, ec);
    STOA_CHECK(s.episode->tokens() == w->lease.prompt_tokens, ErrorKind::kInvalidArgument, "lease ",
               w->lease.lease_id, ": the hub's prompt (", w->lease.prompt_tokens.size(),
               " tokens) differs from this worker's rendering (", s.episode->tokens().size(),
               ") — is --model the run's tokenizer?");
    s.record = std::make_unique<RolloutRecord>(w->lease, joined.worker_id, joined.topk);
    s.seq = std::make_unique<engine::Sequence>(runner->new_sequence(max_tokens));
    engine::SamplingParams sp;
    sp.temperature = w->lease.sampling.temperature;
    sp.top_p = w->lease.sampling.top_p;
    sp.top_k = w->lease.sampling.top_k;
    sp.top_logprobs = joined.topk;
    s.sampler = std::make_unique<engine::Sampler>(sp, seeder.next());
    s.pending = w->lease.prompt_tokens;
    s.turn_budget = std::min<int64_t>(w->lease.sampling.max_new_tokens,
                                      max_tokens - static_cast<int64_t>(s.pending.size()));
    s.started = Clock::now();
    s.started_unix_ms = unix_ms();
    std::lock_guard lock(work_mutex);
    --w->to_start;
    ++w->running;
  };

  try {
    while (true) {
      if (!draining && (stop || (o.max_minutes > 0 &&
                                 std::chrono::duration<double>(Clock::now() - t_start).count() >
                                     o.max_minutes * 60))) {
        draining = true;
        drain_deadline = Clock::now() + std::chrono::seconds(o.shutdown_grace_s);
        log_info("worker", "stopping: finishing rollouts in progress (up to ", o.shutdown_grace_s,
                 " s)");
      }
      // Safe point: no pass is running, so the weights may change under every sequence.
      if (auto update = sync.take_update()) {
        if (!runner)
          runner = std::make_unique<engine::ModelRunner>(
              engine_weights_from_update(config, *update), pool);
        else
          apply_update(runner->mutable_weights(), *update);
        engine_version = update->version;
        engine_version_atomic = engine_version;
        have_engine = true;
        ++stats.weight_switches;
        log_info("worker", "generating with version ", engine_version,
                 update->full ? " (anchor)" : "");
      }
      // Drop cancelled groups' rollouts (the group is complete or closed: nothing to add).
      for (Slot& s : slots)
        if (s.active() && s.work->cancelled) {
          std::lock_guard lock(work_mutex);
          --s.work->running;
          s.clear();
        }
      // Fill free slots: samples of leases we hold first, then a new lease.
      if (runner && !draining) {
        for (Slot& s : slots) {
          if (s.active()) continue;
          std::shared_ptr<LeaseWork> w;
          {
            std::lock_guard lock(work_mutex);
            for (auto& c : works)
              if (c->to_start > 0 && !c->cancelled) {
                w = c;
                break;
              }
          }
          if (!w && Clock::now() >= next_lease) {
            net::LeaseResponse lr;
            try {
              lr = hub.lease();
            } catch (const std::exception& e) {
              log_warn("worker", "lease: ", e.what());
              lr.retry_after_ms = 2000;
            }
            if (lr.lease && static_cast<int64_t>(lr.lease->prompt_tokens.size()) >= max_tokens) {
              // No room to generate (a hub that skips such prompts never sends one): hand it
              // back rather than fail, and do not ask again at once.
              log_warn("worker", "lease ", lr.lease->lease_id, ": the prompt has ",
                       lr.lease->prompt_tokens.size(), " tokens, max_tokens is ", max_tokens,
                       "; releasing it");
              try {
                hub.release(lr.lease->lease_id);
              } catch (const std::exception& e) {
                log_warn("worker", "release ", lr.lease->lease_id, ": ", e.what());
              }
              lr.lease.reset();
              lr.retry_after_ms = 1000;
            }
            if (lr.lease) {
              w = std::make_shared<LeaseWork>();
              w->lease = *lr.lease;
              w->problem.id = w->lease.prompt_id;
              w->problem.question = w->lease.question;
              w->to_start = w->lease.samples;
              ++stats.leases;
              std::lock_guard lock(work_mutex);
              works.push_back(w);
            } else {
              next_lease = Clock::now() +
                           std::chrono::milliseconds(std::max<int64_t>(50, lr.retry_after_ms));
            }
          }
          if (!w) break;
          start_slot(s, w);
        }
      }
      // Forget groups with nothing left to do.
      {
        std::lock_guard lock(work_mutex);
        std::erase_if(works, [](const auto& w) {
          return w->running == 0 && (w->to_start == 0 || w->cancelled);
        });
      }
      size_t active = 0;
      for (Slot& s : slots) active += s.active();
      if (draining && (active == 0 || Clock::now() >= drain_deadline)) break;
      if (active == 0) {
        const auto t0 = Clock::now();
        std::this_thread::sleep_for(runner ? 50ms : 200ms);
        idle_ms += ms_since(t0);
        idle_fraction = idle_ms / std::max(1.0, ms_since(t_start));
        continue;
      }
      // One batched pass over every active rollout.
      std::vector<engine::SequenceInput> inputs;
      std::vector<Slot*> order;
      for (Slot& s : slots)
        if (s.active()) {
          inputs.push_back({s.seq.get(), s.pending, engine::Logits::kLast});
          order.push_back(&s);
        }
      const engine::PassLogits logits = runner->append_batch_view(inputs);
      for (size_t i = 0; i < order.size(); ++i) {
        Slot& s = *order[i];
        const std::span<const float> l = logits.last(i);
        engine::SampledToken t = s.sampler->sample(
            l.first(static_cast<size_t>(std::min<int64_t>(logits.vocab(), sample_vocab))));
        std::vector<int32_t> ids;
        std::vector<float> lps;
        if (joined.topk > 0) {
          for (const auto& e : t.top) {
            if (ids.size() == static_cast<size_t>(joined.topk)) break;
            ids.push_back(e.token);
            lps.push_back(e.logprob);
          }
          // Every row must hold the sampled token (the hub checks it); pad short rows with it.
          if (std::find(ids.begin(), ids.end(), t.token) == ids.end()) {
            if (ids.size() == static_cast<size_t>(joined.topk)) {
              ids.back() = t.token;
              lps.back() = t.logprob;
            }
          }
          while (ids.size() < static_cast<size_t>(joined.topk)) {
            ids.push_back(t.token);
            lps.push_back(t.logprob);
          }
        }
        s.record->add_generated(t.token, t.logprob, engine_version, ids, lps);
        s.turn.push_back(t.token);
        s.pending.assign(1, t.token);
        ++tokens_generated;
        const bool eos = config.eos_token_id >= 0 && t.token == config.eos_token_id;
        const bool budget = static_cast<int64_t>(s.turn.size()) >= s.turn_budget;
        if (eos || budget || s.episode->stop_position(codec.decode(s.turn)) != std::string::npos)
          end_turn(s);
      }
      idle_fraction = idle_ms / std::max(1.0, ms_since(t_start));
    }
  } catch (...) {
    threads_stop = true;
    hub.http().cancel();
    sync_thread.join();
    heartbeat_thread.join();
    throw;
  }

  // ---- clean shutdown: release what we did not finish, hand over what we did ----
  {
    std::lock_guard lock(work_mutex);
    for (auto& w : works)
      if (!w->cancelled && (w->to_start > 0 || w->running > 0)) {
        try {
          hub.release(w->lease.lease_id);
          ++stats.leases_released;
        } catch (const std::exception& e) {
          log_warn("worker", "release ", w->lease.lease_id, ": ", e.what());
        }
      }
  }
  streamer.stop(true, std::chrono::seconds(o.shutdown_grace_s));
  threads_stop = true;
  // A live hub answers the sync's long-poll within its 5 s; a dead one would keep the threads
  // in their retries: past that, cancel them (after, so a clean stop logs no cancelled calls).
  for (int i = 0; i < 130 && threads_done < 2; ++i) std::this_thread::sleep_for(50ms);
  if (threads_done < 2) hub.http().cancel();
  sync_thread.join();
  heartbeat_thread.join();
  stats.tokens_generated = tokens_generated;
  stats.idle_fraction = idle_fraction;
  const StreamCounters c = streamer.counters();
  log_info("worker", "stopped: ", stats.rollouts_finished, " rollouts (", c.accepted, " accepted, ",
           c.duplicate, " duplicate, ", c.rejected, " rejected, ", streamer.pending(),
           " left in the spool), ", stats.tokens_generated, " tokens, ", stats.weight_switches,
           " weight switches, idle ", stats.idle_fraction);
  return stats;
}

}  // namespace stoa::worker
