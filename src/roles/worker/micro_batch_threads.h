// The threads that keep a pipeline group's micro-batches in flight (docs/design/pipeline.md,
// "Micro-batches in a run"): one thread per micro-batch, each running its body (serve its
// micro-batch's slots, then one step of its EpisodeRunner) over and over between a resume() and
// the next pause(). The rollout loop's own thread is the coordinator: between pause() and
// resume() no body runs, so that is the safe point where the weights switch for every
// micro-batch at once (none can mix versions) and a broken pipeline is rebuilt.
//
// A body that throws stops its own thread's iterations at once and asks the others to stop after
// theirs: the coordinator sees failed(), pauses, and takes the first error (error()) — a broken
// pipeline fails every micro-batch with the same reason, and it is handled once.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stoa::worker {

class MicroBatchThreads {
 public:
  using Body = std::function<void(size_t index)>;

  // `count` threads, paused until the first resume(). `body` must stay callable until the
  // object is gone.
  MicroBatchThreads(size_t count, Body body);
  ~MicroBatchThreads();  // stops after the iterations running, joins
  MicroBatchThreads(const MicroBatchThreads&) = delete;
  MicroBatchThreads& operator=(const MicroBatchThreads&) = delete;

  size_t size() const { return threads_.size(); }
  // Every thread iterates its body until the next pause() (or a body's failure). Forgets the
  // error of the last phase.
  void resume();
  // Asks every thread to stop after its current iteration and returns when none runs.
  void pause();
  // A body threw since the last resume() (the threads are stopping or stopped).
  bool failed() const;
  // The first exception a body threw since the last resume() (null when none).
  std::exception_ptr error() const;
  // Iterations finished since construction (all threads together).
  uint64_t iterations() const;

 private:
  void loop(size_t index);

  Body body_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;  // the coordinator resumed and has not paused
  bool stopping_ = false;
  size_t busy_ = 0;  // threads inside their body now
  uint64_t iterations_ = 0;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

}  // namespace stoa::worker
