#pragma once
// Intra-op parallelism: parallel_for splits a range across a pool of worker
// threads (the caller works too). Like torch.set_num_threads, the count is
// process-wide and also applied to OpenBLAS.
#include <cstdint>
#include <functional>

namespace trainrun {

void set_num_threads(int n);
int get_num_threads();
// True inside a parallel_for body (nested calls run serially there).
bool in_parallel_region();
// The threads an OpenMP library (oneDNN) may use now: one inside our own
// parallel region, and one in a process forked from one that had threads
// (libgomp's pool does not survive fork: the child would wait forever on
// the parent's workers, as PyTorch's forked DataLoader workers would).
int openmp_threads();

// Calls fn(chunk_begin, chunk_end) over [begin, end) in chunks of at least
// `grain` elements, in parallel when the range is big enough. Exceptions from
// any chunk are rethrown on the caller after every chunk has finished.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

// Elements per chunk below which elementwise kernels stay on one thread.
constexpr int64_t kElementwiseGrain = 32768;

}  // namespace trainrun
