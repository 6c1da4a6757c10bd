#include "tensor/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace trainrun {
namespace {

thread_local bool t_in_parallel = false;

// Workers wait for "jobs": a job is a function over chunk ids that every
// participant pulls from a shared counter. Workers spin briefly before
// sleeping, because waking an idle vCPU here costs milliseconds.
class WorkerPool {
 public:
  explicit WorkerPool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }

  // Runs body(chunk) for chunk in [0, nchunks) on the caller and the workers.
  void run(int64_t nchunks, const std::function<void(int64_t)>& body) {
    std::lock_guard<std::mutex> run_lock(run_mu_);  // one job at a time
    {
      std::lock_guard<std::mutex> lock(mu_);
      body_ = &body;
      nchunks_ = nchunks;
      next_chunk_.store(0);
      pending_.store(nchunks);
      error_ = nullptr;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    cv_.notify_all();
    work_on_job();
    while (pending_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work_on_job() {
    bool was = t_in_parallel;
    t_in_parallel = true;
    for (;;) {
      int64_t c = next_chunk_.fetch_add(1);
      if (c >= nchunks_) break;
      try {
        (*body_)(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
    t_in_parallel = was;
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      // Spin for a short while: back-to-back ops then find the worker awake.
      auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(2000);
      while (published_.load(std::memory_order_acquire) == seen && !stop_.load() &&
             std::chrono::steady_clock::now() < spin_until) {
        std::this_thread::yield();
      }
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen || stop_.load(); });
        if (stop_.load()) return;
        seen = generation_;
      }
      if (body_ != nullptr) work_on_job();
    }
  }

  friend void hold_pool_across_fork();
  friend void release_pool_after_fork(bool child);

  std::vector<std::thread> threads_;
  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0};
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t nchunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int64_t> pending_{0};
  std::exception_ptr error_;
};

std::mutex g_pool_mu;
int g_num_threads = 0;  // 0: not yet chosen
std::unique_ptr<WorkerPool> g_pool;

// OMP_NUM_THREADS when it is a positive number (what the launcher sets for
// each of several workers, as torchrun does), else one per CPU. (libgomp
// itself reports a value it cannot read.)
int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* rest = nullptr;
    const long n = std::strtol(env, &rest, 10);
    if (rest != env && (*rest == '\0' || *rest == ',') && n > 0 && n <= 4096) return static_cast<int>(n);
  }
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

// fork() copies only the calling thread: the child's pool has no workers and
// its locks may be held by threads that do not exist there. Hold the locks
// across fork (no job runs then); the child forgets the old pool (leaked: its
// std::threads cannot be joined) and starts a new one on first use, so
// DataLoader workers and multiprocessing children parallelize normally.
void hold_pool_across_fork() {
  g_pool_mu.lock();
  if (g_pool) g_pool->run_mu_.lock();
}

std::atomic<bool> g_forked_child{false};

void release_pool_after_fork(bool child) {
  if (child) g_forked_child.store(true);
  if (g_pool) {
    g_pool->run_mu_.unlock();
    if (child) (void)g_pool.release();
  }
  g_pool_mu.unlock();
}

[[maybe_unused]] const bool g_fork_handlers = [] {
  pthread_atfork(hold_pool_across_fork, [] { release_pool_after_fork(false); },
                 [] { release_pool_after_fork(true); });
  return true;
}();

WorkerPool* pool() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (g_num_threads == 0) g_num_threads = default_threads();
  if (!g_pool && g_num_threads > 1) g_pool = std::make_unique<WorkerPool>(g_num_threads - 1);
  return g_pool.get();
}

}  // namespace

void set_num_threads(int n) {
  TR_CHECK(n >= 1, ValueError, "set_num_threads: expected a positive thread count, got {}", n);
  std::lock_guard<std::mutex> lock(g_pool_mu);
  if (n != g_num_threads) {
    g_pool.reset();  // joins the old workers
    g_num_threads = n;
  }
  openblas_set_num_threads(n);
}

int get_num_threads() {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  return g_num_threads == 0 ? default_threads() : g_num_threads;
}

bool in_parallel_region() { return t_in_parallel; }

int openmp_threads() { return t_in_parallel || g_forked_child.load() ? 1 : get_num_threads(); }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (begin >= end) return;
  int64_t range = end - begin;
  grain = std::max<int64_t>(grain, 1);
  WorkerPool* p = (t_in_parallel || range <= grain) ? nullptr : pool();
  if (p == nullptr) {
    fn(begin, end);
    return;
  }
  int64_t participants = p->workers() + 1;
  // A few chunks per thread, pulled from a shared counter: a thread that
  // starts late (a vCPU waking up) takes fewer of them.
  int64_t nchunks = std::min<int64_t>(participants * 4, (range + grain - 1) / grain);
  int64_t chunk = (range + nchunks - 1) / nchunks;
  p->run(nchunks, [&](int64_t c) {
    int64_t b = begin + c * chunk;
    int64_t e = std::min(end, b + chunk);
    if (b < e) fn(b, e);
  });
}

}  // namespace trainrun
