// INTERNAL (includes libtorch). The trainer builds against two libtorch generations: Debian 12's
// 1.13 (CPU) and 2.x (Debian 13's 2.6 in the trixie chroot of `scripts/setup --torch2`, and the
// CUDA libtorch inside Python torch that scripts/gpu-check uses). Each difference between them is
// named once here, so a call site is written once for both (docs/design/train.md, "Two libtorch
// generations").
#pragma once
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include <torch/optim/optimizer.h>
#include <torch/version.h>

// c10d: in 1.13 ProcessGroupGloo / ProcessGroupNCCL derive from c10d::ProcessGroup; from 2.0 on
// they implement c10d::Backend (a ProcessGroup became a dispatcher over backends). Both bases
// declare the collectives the trainer calls (allreduce, broadcast, allgather) with the same
// signatures, so the base a group is held as is all that changes. Declared, not included: only
// communicator.cpp uses it, and it includes the c10d headers itself.
namespace c10d {
#if TORCH_VERSION_MAJOR >= 2
class Backend;
#else
class ProcessGroup;
#endif
}  // namespace c10d

namespace stoa::train {

#if TORCH_VERSION_MAJOR >= 2
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// c10d::TCPStoreOptions: from 2.4 on it defaults to a libuv server loop (`useLibUV = true`), which
// a libtorch built without libuv support refuses at construction (Debian 13's 2.6: "use_libuv was
// requested but PyTorch was build without libuv support"). The classic socket server, the only
// one 1.13 has, is in every build and ample for a few ranks, so every store uses it.
template <typename StoreOptions>
void use_classic_tcp_store(StoreOptions& options) {
  if constexpr (requires { options.useLibUV; }) options.useLibUV = false;
}

// torch::optim keeps each parameter's state (AdamW's step and moments) in a map keyed by the
// parameter's TensorImpl: its address printed as text in 1.13, the address itself in 2.x. The key
// type is read from the map, so this follows whichever libtorch is compiled against.
using OptimizerStateKey =
    std::remove_cvref_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

template <typename Key = OptimizerStateKey>
Key optimizer_state_key(const torch::Tensor& parameter) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // what 1.13's c10::guts::to_string wrote
    address << parameter.unsafeGetTensorImpl();
    return address.str();
  } else {
    return parameter.unsafeGetTensorImpl();
  }
}

}  // namespace stoa::train
