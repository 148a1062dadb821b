// The rank's c10d process groups: a TCPStore rendezvous, Gloo for everything on the CPU (and the
// command channel always), NCCL for CUDA tensors when libtorch was built with it. Debian's
// libtorch 1.13 exports ProcessGroupGloo and TCPStore; its Gloo group has no usable
// reduce_scatter or _allgather_base, so the trainer composes ZeRO-1 from all-reduce and
// broadcast (docs/design/distributed-trainer.md). What differs in libtorch 2.x (groups are
// c10d::Backend implementations; TCPStore's libuv default) is named in torch_compat.h.
#include "train/communicator.h"

#include <chrono>
#include <cstdlib>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "core/error.h"
#include "core/log.h"
#include "train/torch_compat.h"

namespace stoa::train {
namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  STOA_CHECK(end && *end == '\0', ErrorKind::kInvalidArgument, "environment variable ", name, "='",
             text, "' is not an integer");
  return value;
}

// Where this rank's Gloo pairs listen: the interface GLOO_SOCKET_IFNAME names, loopback for a
// single-machine run, else the address the host name resolves to.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (master_addr == "127.0.0.1" || master_addr == "localhost") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Consecutive runs of tensors whose bytes fit one bucket (a larger tensor is a bucket alone).
std::vector<std::pair<size_t, size_t>> buckets(const std::vector<torch::Tensor>& tensors,
                                               int64_t bucket_bytes) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  while (begin < tensors.size()) {
    int64_t bytes = tensors[begin].nbytes();
    size_t end = begin + 1;
    while (end < tensors.size() &&
           bytes + static_cast<int64_t>(tensors[end].nbytes()) <= bucket_bytes) {
      bytes += static_cast<int64_t>(tensors[end].nbytes());
      ++end;
    }
    out.emplace_back(begin, end);
    begin = end;
  }
  return out;
}

torch::Tensor flatten(const std::vector<torch::Tensor>& tensors, size_t begin, size_t end) {
  std::vector<torch::Tensor> flat;
  for (size_t i = begin; i < end; ++i) flat.push_back(tensors[i].detach().reshape({-1}));
  return torch::cat(flat);
}

void unflatten(const torch::Tensor& flat, const std::vector<torch::Tensor>& tensors, size_t begin,
               size_t end) {
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (size_t i = begin; i < end; ++i) {
    const int64_t n = tensors[i].numel();
    tensors[i].detach().copy_(flat.slice(0, at, at + n).view_as(tensors[i]));
    at += n;
  }
}

}  // namespace

RendezvousOptions rendezvous_from_env() {
  RendezvousOptions o;
  o.world_size = static_cast<int>(env_int("WORLD_SIZE", 1));
  o.rank = static_cast<int>(env_int("RANK", 0));
  o.local_rank = static_cast<int>(env_int("LOCAL_RANK", o.rank));
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) o.master_addr = addr;
  o.master_port = static_cast<int>(env_int("MASTER_PORT", 0));
  if (const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE")) {
    o.agent_store = std::string(agent) == "True" || std::string(agent) == "1";
  }
  o.timeout_s = static_cast<double>(env_int("STOA_DIST_TIMEOUT_S", 120));
  o.hash_check_every = env_int("STOA_DIST_HASH_EVERY", o.hash_check_every);
  STOA_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, ErrorKind::kInvalidArgument,
             "RANK=", o.rank, " WORLD_SIZE=", o.world_size, ": RANK must be in [0, WORLD_SIZE)");
  STOA_CHECK(o.world_size == 1 || (o.master_port > 0 && o.master_port < 65536),
             ErrorKind::kInvalidArgument, "WORLD_SIZE=", o.world_size,
             " needs MASTER_PORT (the TCPStore's port), got ", o.master_port);
  return o;
}

struct Communicator::Groups {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<CollectiveGroup> gloo;
  c10::intrusive_ptr<CollectiveGroup> nccl;  // CUDA tensors, when built with NCCL
  CollectiveGroup& group_for(const torch::Tensor& t) { return nccl && t.is_cuda() ? *nccl : *gloo; }
};

Communicator::Communicator(const RendezvousOptions& options)
    : options_(options), groups_(std::make_unique<Groups>()) {
  if (options_.world_size == 1) return;
  try {
    c10d::TCPStoreOptions store;
    store.port = static_cast<std::uint16_t>(options_.master_port);
    store.isServer = options_.rank == 0 && !options_.agent_store;
    store.waitWorkers = false;
    store.timeout = to_ms(options_.timeout_s);
    use_classic_tcp_store(store);
    groups_->store = c10::make_intrusive<c10d::TCPStore>(options_.master_addr, store);
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(to_ms(options_.timeout_s));
    gloo_options->devices.push_back(gloo_device(options_.master_addr));
    groups_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", groups_->store), options_.rank,
        options_.world_size, gloo_options);
#ifdef USE_C10D_NCCL
    if (torch::cuda::is_available()) {
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = to_ms(options_.timeout_s);
      groups_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("nccl", groups_->store), options_.rank,
          options_.world_size, nccl_options);
    }
#endif
  } catch (const stoa::Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(ErrorKind::kNetwork, "rank ", options_.rank, " of ", options_.world_size,
         ": cannot join the process group at ", options_.master_addr, ":", options_.master_port,
         " within ", options_.timeout_s, " s: ", e.what());
  }
  log_info("dist", "rank ", options_.rank, " of ", options_.world_size, " joined (",
           groups_->nccl ? "nccl + gloo" : "gloo", ")");
}

Communicator::~Communicator() = default;

// A failed collective (a peer died: connection reset; or the timeout passed) becomes one clear
// stoa::Error; the run stops instead of hanging.
void Communicator::run(const std::string& what, const std::function<void()>& collective) {
  try {
    collective();
  } catch (const std::exception& e) {
    fail(ErrorKind::kNetwork, "rank ", options_.rank, " of ", options_.world_size, ": ", what,
         " failed (another rank died or did not answer within ", options_.timeout_s,
         " s): ", e.what());
  }
}

void Communicator::all_reduce_sum(const std::vector<torch::Tensor>& tensors) {
  if (world_size() == 1 || tensors.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  for (auto [begin, end] : buckets(tensors, options_.bucket_bytes)) {
    std::vector<torch::Tensor> flat{flatten(tensors, begin, end)};
    stats_.all_reduce_bytes += static_cast<int64_t>(flat[0].nbytes());
    run("all-reduce", [&] { groups_->group_for(flat[0]).allreduce(flat)->wait(); });
    unflatten(flat[0], tensors, begin, end);
  }
  stats_.all_reduce_seconds += since(start);
}

void Communicator::all_reduce_max(const torch::Tensor& tensor) {
  if (world_size() == 1) return;
  std::vector<torch::Tensor> one{tensor};
  c10d::AllreduceOptions max;
  max.reduceOp = c10d::ReduceOp::MAX;
  run("all-reduce (max)", [&] { groups_->group_for(tensor).allreduce(one, max)->wait(); });
}

void Communicator::broadcast(const std::vector<torch::Tensor>& tensors, int root) {
  if (world_size() == 1 || tensors.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  c10d::BroadcastOptions from;
  from.rootRank = root;
  for (auto [begin, end] : buckets(tensors, options_.bucket_bytes)) {
    std::vector<torch::Tensor> flat{flatten(tensors, begin, end)};
    run("broadcast", [&] { groups_->group_for(flat[0]).broadcast(flat, from)->wait(); });
    if (rank() != root) unflatten(flat[0], tensors, begin, end);
  }
  stats_.broadcast_seconds += since(start);
}

void Communicator::broadcast_bytes(std::string* bytes) {
  if (world_size() == 1) return;
  const auto start = std::chrono::steady_clock::now();
  c10d::BroadcastOptions from;  // root 0
  std::vector<torch::Tensor> size{torch::tensor({static_cast<int64_t>(bytes->size())})};
  run("command broadcast", [&] { groups_->gloo->broadcast(size, from)->wait(); });
  const int64_t n = size[0].item<int64_t>();
  if (!leader()) bytes->assign(static_cast<size_t>(n), '\0');
  if (n > 0) {
    std::vector<torch::Tensor> data{torch::from_blob(bytes->data(), {n}, torch::kUInt8)};
    run("command broadcast", [&] { groups_->gloo->broadcast(data, from)->wait(); });
  }
  stats_.broadcast_seconds += since(start);
}

std::vector<int64_t> Communicator::all_gather(int64_t value) {
  if (world_size() == 1) return {value};
  std::vector<torch::Tensor> input{torch::tensor({value})};
  std::vector<std::vector<torch::Tensor>> output(1);
  for (int r = 0; r < world_size(); ++r) output[0].push_back(torch::zeros({1}, torch::kInt64));
  run("all-gather", [&] { groups_->gloo->allgather(output, input)->wait(); });
  std::vector<int64_t> values;
  for (const torch::Tensor& t : output[0]) values.push_back(t.item<int64_t>());
  return values;
}

void Communicator::send_through(const torch::Tensor& values, int64_t numel, int root) {
  if (world_size() == 1 || numel == 0) return;
  const auto start = std::chrono::steady_clock::now();
  const int64_t chunk = std::max<int64_t>(1, options_.bucket_bytes / 4);
  torch::Tensor scratch;
  torch::Tensor flat = values.defined() ? values.view({-1}) : torch::Tensor();
  c10d::BroadcastOptions from;
  from.rootRank = root;
  for (int64_t at = 0; at < numel; at += chunk) {
    const int64_t n = std::min(chunk, numel - at);
    if (!flat.defined() && !scratch.defined()) scratch = torch::empty({std::min(chunk, numel)});
    std::vector<torch::Tensor> part{flat.defined() ? flat.narrow(0, at, n)
                                                   : scratch.narrow(0, 0, n)};
    run("broadcast", [&] { groups_->group_for(part[0]).broadcast(part, from)->wait(); });
  }
  stats_.broadcast_seconds += since(start);
}

void Communicator::all_gather_into(const torch::Tensor& full, const torch::Tensor& shard) {
  const int64_t S = shard.numel();
  STOA_CHECK(full.dim() == 1 && shard.dim() == 1 && full.numel() == S * world_size() &&
                 full.is_contiguous(),
             ErrorKind::kInternal, "all_gather_into: a flat buffer of world x shard elements");
  full.narrow(0, S * rank(), S).copy_(shard);
  if (world_size() == 1) return;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < world_size(); ++r) {
    std::vector<torch::Tensor> part{full.narrow(0, S * r, S)};
    c10d::BroadcastOptions from;
    from.rootRank = r;
    run("all-gather", [&] { groups_->group_for(part[0]).broadcast(part, from)->wait(); });
  }
  stats_.broadcast_seconds += since(start);
}

void Communicator::reduce_scatter_sum(const torch::Tensor& full) {
  if (world_size() == 1) return;
  STOA_CHECK(full.is_contiguous(), ErrorKind::kInternal, "reduce_scatter_sum: a flat buffer");
  const auto start = std::chrono::steady_clock::now();
  std::vector<torch::Tensor> one{full};
  stats_.all_reduce_bytes += static_cast<int64_t>(full.nbytes());
  run("reduce-scatter", [&] { groups_->group_for(full).allreduce(one)->wait(); });
  stats_.all_reduce_seconds += since(start);
}

int communicator_rank(const Communicator& ranks) {
  return ranks.rank();
}
int communicator_world_size(const Communicator& ranks) {
  return ranks.world_size();
}
CommunicatorStats communicator_stats(const Communicator& ranks) {
  return ranks.stats();
}

std::shared_ptr<Communicator> connect_ranks(const RendezvousOptions& options) {
  return std::make_shared<Communicator>(options);
}

struct RendezvousServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

RendezvousServer::RendezvousServer(int world_size, double timeout_s)
    : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions o;
  o.port = 0;  // a free port, read back below
  o.isServer = true;
  o.numWorkers = static_cast<std::size_t>(world_size);
  o.waitWorkers = false;
  o.timeout = to_ms(timeout_s);
  use_classic_tcp_store(o);
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
  } catch (const std::exception& e) {
    fail(ErrorKind::kNetwork, "cannot start the rendezvous store: ", e.what());
  }
}
RendezvousServer::~RendezvousServer() = default;
int RendezvousServer::port() const {
  return impl_->store->getPort();
}

}  // namespace stoa::train
