#include "zenith/threadpool.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace zenith {
namespace {

class Pool {
 public:
  ~Pool() { resize(1); }

  void resize(int n) {
    std::lock_guard<std::mutex> job(job_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
    stop_ = false;
    threads_ = std::max(1, n);
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { loop(i); });
  }

  int size() const { return threads_; }

  void run(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
    int64_t chunks = std::min<int64_t>(threads_, (n + std::max<int64_t>(min_chunk, 1) - 1) / std::max<int64_t>(min_chunk, 1));
    std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
    if (chunks <= 1 || !job.owns_lock()) {
      fn(0, n);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      n_ = n;
      chunks_ = chunks;
      pending_ = int(chunks) - 1;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    std::exception_ptr mine;
    try {
      fn(0, bound(1));
    } catch (...) {
      mine = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  int64_t bound(int64_t i) const { return n_ * i / chunks_; }

  void loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t, int64_t)>* fn;
      int64_t lo, hi;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (!fn_ || index >= chunks_) continue;
        fn = fn_;
        lo = bound(index);
        hi = bound(index + 1);
      }
      std::exception_ptr err;
      try {
        (*fn)(lo, hi);
      } catch (...) {
        err = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (err && !error_) error_ = err;
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::mutex job_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int threads_ = 1;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool* p = new Pool();  // leaked on purpose: no join during static destruction
  return *p;
}

}  // namespace

void set_num_threads(int n) {
  if (n != pool().size()) pool().resize(n);
}
int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  pool().run(n, min_chunk, fn);
}

}  // namespace zenith
