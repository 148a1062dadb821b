#include "roles/worker/join.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "engine/arithmetic.h"
#include "net/join_string.h"

namespace stoa::worker {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

}  // namespace

HubTarget hub_target(const std::string& hub_url, const std::string& join_token,
                     const std::string& join_string) {
  HubTarget t{hub_url, join_token, {}};
  if (!join_string.empty()) {
    const net::JoinString js = net::parse_join_string(join_string);
    t.url = js.url;
    t.join_token = js.token;
    t.http.pin_sha256 = js.sha256;  // the hub's certificate, whoever signed it
  }
  return t;
}

net::JoinResponse join_hub(net::HubClient& hub, const std::string& join_token,
                           const std::string& name, int threads, const std::string& state_dir,
                           int join_timeout_s, const std::atomic<bool>& stop,
                           const std::function<void(const std::exception& why)>& on_retry,
                           bool* resumed) {
  fs::create_directories(state_dir);
  const fs::path id_file = fs::path(state_dir) / "worker_id";
  const fs::path secret_file = fs::path(state_dir) / "worker_secret";
  net::JoinRequest join_req;
  join_req.name = name;
  join_req.threads = threads;
  join_req.arithmetic = engine::kArithmetic;
  // An id is only worth resuming with its secret (the hub refuses the id alone).
  if (fs::exists(id_file) && fs::exists(secret_file)) {
    join_req.resume_id = read_text(id_file);
    join_req.resume_secret = read_text(secret_file);
  }
  const net::JoinResponse joined = [&] {
    const auto deadline = Clock::now() + std::chrono::seconds(join_timeout_s);
    auto back_off = [&](int attempt, const std::exception& why) {
      // The progress report words it for the volunteer; the log keeps it for --verbose.
      if (on_retry) {
        log_info("worker", "join: ", why.what(), "; retrying");
        on_retry(why);
      } else {
        log_warn("worker", "join: ", why.what(), "; retrying");
      }
      const auto wait = std::chrono::milliseconds(std::min(5000, 250 << std::min(attempt, 5)));
      for (auto t = 0ms; t < wait && !stop && Clock::now() < deadline; t += 50ms)
        std::this_thread::sleep_for(50ms);
    };
    for (int attempt = 0;; ++attempt) {
      try {
        return hub.join(join_token, join_req);
      } catch (const net::JoinRefused& e) {
        // Rate limited (the client already waited out each Retry-After): not a refusal.
        if (e.status() == 429 && !stop && Clock::now() < deadline) {
          back_off(attempt, e);
          continue;
        }
        // The hub knows this id under another secret (the state dir was copied or the secret
        // lost): join as a new worker rather than not at all.
        if (e.status() != 403 || join_req.resume_id.empty()) throw;
        log_warn("worker", "resume of ", join_req.resume_id, " refused (", e.what(),
                 "); joining as a new worker");
        join_req.resume_id.clear();
        join_req.resume_secret.clear();
        continue;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kNetwork || stop || Clock::now() >= deadline) throw;
        back_off(attempt, e);
      }
    }
  }();
  // A hub of another formula could not check this worker's rollouts (nor it the hub's jobs).
  engine::require_hub_arithmetic(joined.arithmetic, "worker");
  { std::ofstream(id_file) << joined.worker_id << "\n"; }
  if (!joined.worker_secret.empty()) {
    // Owner-only: it is this identity's proof (a resume without it is refused).
    std::ofstream(secret_file, std::ios::trunc) << joined.worker_secret << "\n";
    fs::permissions(secret_file, fs::perms::owner_read | fs::perms::owner_write,
                    fs::perm_options::replace);
  }
  log_info("worker", name, " joined as ", joined.worker_id,
           join_req.resume_id.empty() ? "" : " (resumed)");
  if (resumed) *resumed = !join_req.resume_id.empty();
  return joined;
}

}  // namespace stoa::worker
