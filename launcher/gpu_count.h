#pragma once
// How many GPUs this node's workers can see, for --nproc-per-node gpu|auto.
// Asks the CUDA driver (loaded with dlopen, so the launcher neither links
// the CUDA runtime nor needs a GPU machine to start); CUDA_VISIBLE_DEVICES
// applies, as it does for the workers.
#include <string>

namespace trainrun {

struct GpuCount {
  int count = 0;
  std::string reason;  // why count is 0 ("no CUDA driver (libcuda.so.1 not found)", ...); empty otherwise
};

GpuCount count_gpus();

}  // namespace trainrun
