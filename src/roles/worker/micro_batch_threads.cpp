#include "roles/worker/micro_batch_threads.h"

namespace stoa::worker {

MicroBatchThreads::MicroBatchThreads(size_t count, Body body) : body_(std::move(body)) {
  threads_.reserve(count);
  for (size_t i = 0; i < count; ++i) threads_.emplace_back([this, i] { loop(i); });
}

MicroBatchThreads::~MicroBatchThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    running_ = false;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void MicroBatchThreads::resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = nullptr;
    running_ = true;
  }
  cv_.notify_all();
}

void MicroBatchThreads::pause() {
  std::unique_lock<std::mutex> lock(mu_);
  running_ = false;
  cv_.wait(lock, [&] { return busy_ == 0; });
}

bool MicroBatchThreads::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_ != nullptr;
}

std::exception_ptr MicroBatchThreads::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

uint64_t MicroBatchThreads::iterations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return iterations_;
}

void MicroBatchThreads::loop(size_t index) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || running_; });
    if (stopping_) return;
    ++busy_;
    lock.unlock();
    std::exception_ptr thrown;
    try {
      body_(index);
    } catch (...) {
      thrown = std::current_exception();
    }
    lock.lock();
    --busy_;
    ++iterations_;
    if (thrown) {
      // The first failure is the one the coordinator handles; every thread stops after its
      // iteration (a broken pipeline would fail them all the same way).
      if (!error_) error_ = thrown;
      running_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace stoa::worker
