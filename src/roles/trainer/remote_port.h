// The TrainerPort of a trainer away from its hub (`stoa train --config run.toml --hub URL`): the
// trainer behind NAT dials out to `stoa hub` over HTTPS with a token of scope `train` and drives
// the hub's trainer routes (docs/protocol.md, "Trainer"; roles/hub/http/trainer_routes.cpp). The
// trainer loop does not know the difference: it takes groups, marks them and publishes as it does
// against the in-process hub.
//
// Publishing: the trainer's Publisher writes into a store of the trainer's own (the durable copy
// of its int8 view, pulse/publisher.h); publish_version uploads, in chunks under the hub's body
// limit and resuming where the hub stands, every blob of the trainer's catalog the hub lacks, then
// hands the hub the catalog — so the hub serves exactly what the trainer published.
//
// Nothing is lost when either side restarts: every call is retried through transport errors and
// 5xx (a hub restarting) until it lands or `stop` is set; the hub is told with every take which
// groups this trainer still holds, so a restarted hub never hands them out twice and a restarted
// trainer gets back what its predecessor held. A hub that refuses the token or reports that
// another trainer attached ends the trainer (RemoteTrainerRefused).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "pulse/blob_store.h"
#include "roles/hub/trainer_port.h"

namespace stoa::net {
class HttpClient;
}

namespace stoa::trainer {

struct RemotePortOptions {
  std::string hub_url;     // http(s)://host:port
  std::string token;       // scope `train`
  std::string pin_sha256;  // HTTPS: the hub certificate's SHA-256 ("": ca_file or the system)
  std::string ca_file;
  uint64_t chunk_bytes = 16u << 20;  // per upload request (the hub's body limit is 32 MiB)
  std::chrono::milliseconds max_backoff{10'000};
};

// The hub refused this trainer for good (token, another trainer attached, a malformed call).
class RemoteTrainerRefused : public Error {
 public:
  explicit RemoteTrainerRefused(const std::string& message)
      : Error(ErrorKind::kInvalidArgument, message) {}
};

class RemoteTrainerPort final : public hub::TrainerPort {
 public:
  // Attaches (retrying until the hub answers or `stop` is set). `store` is the trainer's own.
  RemoteTrainerPort(RemotePortOptions options, pulse::BlobStore& store,
                    const std::atomic<bool>& stop);
  ~RemoteTrainerPort() override;

  std::vector<hub::AcceptedGroup> take_groups(size_t max_groups,
                                              std::chrono::milliseconds wait) override;
  void mark_trained(const std::vector<std::string>& group_ids,
                    const hub::StepReport& report) override;
  void mark_dropped(const std::vector<std::string>& group_ids, const std::string& reason) override;
  void publish_version(const pulse::Published& published, const Hash128& state_hash) override;
  int64_t last_step() const override { return last_step_; }
  std::optional<uint64_t> latest_version() const override { return latest_version_; }
  std::map<std::string, double> counters() const override;

  // The run reached its last step: the hub records the run as ended, tells its workers and
  // stops (a split run ends as `stoa run` does). Retried like every call until it lands or
  // `stop` is set.
  void finish_run();

  uint64_t bytes_uploaded() const { return bytes_uploaded_; }

 private:
  // POSTs `body` (JSON) to `path` until it lands: transport errors and 5xx are retried with
  // back-off until stop; 401/403/409 and other 4xx throw RemoteTrainerRefused.
  nlohmann::json call(const std::string& path, const nlohmann::json& body,
                      std::chrono::milliseconds read_timeout = std::chrono::milliseconds{0});
  void upload(const Hash128& hash);  // one blob of the trainer's store, resuming
  void back_off(int attempt, const std::string& why);

  RemotePortOptions options_;
  pulse::BlobStore& store_;
  const std::atomic<bool>& stop_;
  std::unique_ptr<net::HttpClient> http_;
  std::string session_;
  std::set<std::string> held_;      // taken, not yet marked
  std::set<std::string> uploaded_;  // blob hashes the hub is known to hold
  int64_t last_step_ = 0;
  std::optional<uint64_t> latest_version_;
  uint64_t bytes_uploaded_ = 0;
  int64_t retries_ = 0;
};

}  // namespace stoa::trainer
