// The trainer's side of the trainer routes (remote_port.h).
#include "roles/trainer/remote_port.h"

#include <algorithm>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "net/http_client.h"
#include "net/protocol.h"
#include "pulse/catalog.h"
#include "roles/hub/http/trainer_wire.h"

namespace stoa::trainer {

using nlohmann::json;

namespace {

std::string error_of(const net::HttpResponse& r) {
  auto j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_string())
    return j["error"].get<std::string>();
  return r.body.substr(0, 300);
}

}  // namespace

RemoteTrainerPort::RemoteTrainerPort(RemotePortOptions options, pulse::BlobStore& store,
                                     const std::atomic<bool>& stop)
    : options_(std::move(options)), store_(store), stop_(stop), session_(net::random_token()) {
  net::HttpClientOptions o;
  o.pin_sha256 = options_.pin_sha256;
  o.ca_cert_path = options_.ca_file;
  o.max_attempts = 1;  // call() retries, with the hub's restart in mind
  http_ = std::make_unique<net::HttpClient>(options_.hub_url, o);
  http_->set_bearer_token(options_.token);
  const json a = call("/v1/trainer/attach", json::object());
  last_step_ = a.at("last_step").get<int64_t>();
  if (a.contains("latest_version")) latest_version_ = a.at("latest_version").get<uint64_t>();
  log_info("trainer", "attached to the hub at ", options_.hub_url, " (ledger step ", last_step_,
           ", version ", latest_version_ ? std::to_string(*latest_version_) : "none", ")");
}

RemoteTrainerPort::~RemoteTrainerPort() = default;

void RemoteTrainerPort::back_off(int attempt, const std::string& why) {
  ++retries_;
  if (attempt == 1 || attempt % 10 == 0)
    log_warn("trainer", "the hub at ", options_.hub_url, " is unreachable (", why,
             "); retrying until it answers");
  const auto wait = std::min<std::chrono::milliseconds>(
      options_.max_backoff, std::chrono::milliseconds(200) * (1 << std::min(attempt, 6)));
  for (auto waited = std::chrono::milliseconds(0); waited < wait && !stop_.load();
       waited += std::chrono::milliseconds(50))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

json RemoteTrainerPort::call(const std::string& path, const json& body_in,
                             std::chrono::milliseconds read_timeout) {
  json body = body_in;
  body["session"] = session_;
  const std::string text = body.dump();
  for (int attempt = 1;; ++attempt) {
    if (stop_.load())
      fail(ErrorKind::kNetwork, "trainer: stopped while ", path, " had not reached the hub");
    std::string why;
    try {
      const net::HttpResponse r = http_->post_json(path, text, false, read_timeout);
      if (r.status >= 200 && r.status < 300) return json::parse(r.body);
      if (r.status >= 500 || r.status == 408 || r.status == 429) {
        why = cat("HTTP ", r.status, ": ", error_of(r));
      } else {
        throw RemoteTrainerRefused(cat("the hub at ", options_.hub_url, " refused ", path,
                                       ": HTTP ", r.status, ": ", error_of(r)));
      }
    } catch (const RemoteTrainerRefused&) {
      throw;
    } catch (const Error& e) {
      // A certificate that does not match the pin is never retried: it is not the hub.
      if (e.kind() == ErrorKind::kIntegrity) throw;
      why = e.what();
    }
    back_off(attempt, why);
  }
}

std::vector<hub::AcceptedGroup> RemoteTrainerPort::take_groups(size_t max_groups,
                                                               std::chrono::milliseconds wait) {
  const json r = call("/v1/trainer/groups",
                      {{"held", std::vector<std::string>(held_.begin(), held_.end())},
                       {"max_groups", max_groups},
                       {"wait_ms", wait.count()}},
                      wait + std::chrono::seconds(30));
  std::vector<hub::AcceptedGroup> out;
  for (const auto& g : r.at("groups")) {
    hub::AcceptedGroup group = hub::accepted_group_from_json(g);
    // A group this trainer holds already is never handed to the loop twice (the hub knows what
    // it holds, but an answer crossing a restart of the hub could still carry one).
    if (!held_.insert(group.group_id).second) continue;
    out.push_back(std::move(group));
  }
  return out;
}

void RemoteTrainerPort::mark_trained(const std::vector<std::string>& group_ids,
                                     const hub::StepReport& report) {
  const json r =
      call("/v1/trainer/trained", {{"group_ids", group_ids}, {"report", to_json(report)}});
  for (const auto& id : group_ids) held_.erase(id);
  last_step_ = std::max(last_step_, r.at("last_step").get<int64_t>());
}

void RemoteTrainerPort::finish_run() {
  const json r = call("/v1/trainer/finished", {{"last_step", last_step_}});
  log_info("trainer", "told the hub at ", options_.hub_url, " that the run ended at step ",
           r.value("last_step", last_step_));
}

void RemoteTrainerPort::mark_dropped(const std::vector<std::string>& group_ids,
                                     const std::string& reason) {
  call("/v1/trainer/dropped", {{"group_ids", group_ids}, {"reason", reason}});
  for (const auto& id : group_ids) held_.erase(id);
}

void RemoteTrainerPort::upload(const Hash128& hash) {
  if (uploaded_.count(hash.hex())) return;
  const std::string path = "/v1/trainer/blobs/" + hash.hex();
  const uint64_t total = store_.size_of(hash);
  // Where the hub stands (a restart of either side resumes a part on the hub's disk).
  for (int attempt = 1;; ++attempt) {
    if (stop_.load()) fail(ErrorKind::kNetwork, "trainer: stopped while uploading ", hash.hex());
    std::string why;
    try {
      const net::HttpResponse state = http_->get(path, false);
      if (state.status != 200) {
        if (state.status < 500 && state.status != 408 && state.status != 429)
          throw RemoteTrainerRefused(
              cat("the hub refused ", path, ": HTTP ", state.status, ": ", error_of(state)));
        why = cat("HTTP ", state.status, ": ", error_of(state));
      } else {
        const json s = json::parse(state.body);
        uint64_t offset = s.at("received").get<uint64_t>();
        bool stored = s.at("stored").get<bool>();
        std::ifstream in(store_.path_of(hash), std::ios::binary);
        STOA_CHECK(in.good(), ErrorKind::kIo, "trainer: cannot read blob ", hash.hex());
        std::string chunk;
        while (!stored) {
          const uint64_t n = std::min<uint64_t>(options_.chunk_bytes, total - offset);
          chunk.resize(n);
          in.seekg(static_cast<std::streamoff>(offset));
          in.read(chunk.data(), static_cast<std::streamsize>(n));
          STOA_CHECK(in.good() || n == 0, ErrorKind::kIo, "trainer: cannot read blob ", hash.hex());
          const net::HttpResponse r =
              http_->post_json(cat(path, "?offset=", offset, "&total=", total), chunk, false);
          if (r.status != 200) {
            // 409: the hub stands elsewhere (a lost answer); ask again. 5xx: back off.
            if (r.status != 409 && r.status < 500 && r.status != 408 && r.status != 429)
              throw RemoteTrainerRefused(cat("the hub refused a chunk of ", hash.hex(), ": HTTP ",
                                             r.status, ": ", error_of(r)));
            why = cat("HTTP ", r.status, ": ", error_of(r));
            break;
          }
          bytes_uploaded_ += n;
          const json a = json::parse(r.body);
          offset = a.at("received").get<uint64_t>();
          stored = a.at("stored").get<bool>();
          if (!stored && offset >= total) {
            why = "the hub holds every byte but has not stored the blob";
            break;
          }
        }
        if (stored) {
          uploaded_.insert(hash.hex());
          return;
        }
      }
    } catch (const RemoteTrainerRefused&) {
      throw;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kIntegrity || e.kind() == ErrorKind::kIo) throw;
      why = e.what();
    }
    back_off(attempt, why);
  }
}

void RemoteTrainerPort::publish_version(const pulse::Published& published,
                                        const Hash128& state_hash) {
  hub::PublishedVersion v;
  v.published = published;
  v.state_hash = state_hash;
  v.catalog = pulse::Catalog::load(store_.dir() + "/catalog.json");
  // Every blob the catalog names, not only this version's: a version published into the
  // trainer's store whose upload a crash cut short is in the catalog too.
  for (const auto& e : v.catalog.entries()) upload(e.hash);
  for (const auto& h : published.pruned) uploaded_.erase(h.hex());
  call("/v1/trainer/publish", to_json(v));
  latest_version_ = std::max(latest_version_.value_or(0), published.version);
}

std::map<std::string, double> RemoteTrainerPort::counters() const {
  return {{"trainer_bytes_uploaded", static_cast<double>(bytes_uploaded_)},
          {"trainer_hub_retries", static_cast<double>(retries_)}};
}

}  // namespace stoa::trainer
