#include "train/thread_ranks.h"

#include <exception>
#include <thread>
#include <vector>

#include "train/trainer.h"

namespace stoa::train {

void run_thread_ranks(int world, const std::function<void(std::shared_ptr<Communicator>)>& leader,
                      RendezvousOptions base) {
  RendezvousServer store(world, base.timeout_s);
  auto options = [&](int rank) {
    RendezvousOptions o = base;
    o.rank = rank;
    o.world_size = world;
    o.master_port = store.port();
    o.agent_store = true;
    return o;
  };
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> followers;
  for (int r = 1; r < world; ++r) {
    followers.emplace_back([&, r] {
      try {
        Trainer::follow(connect_ranks(options(r)));
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  try {
    leader(connect_ranks(options(0)));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& t : followers) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace stoa::train
