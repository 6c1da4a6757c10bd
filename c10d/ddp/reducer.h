#pragma once
// DDP's gradient synchronisation: parameters in buckets (reverse order of
// registration, which is roughly the order backward produces gradients;
// the first bucket small so communication starts early), each bucket's
// averaging all-reduce launched as soon as its last gradient has been
// accumulated, so communication overlaps the rest of backward. Buckets are
// launched strictly in bucket order, which keeps every rank's sequence of
// collectives identical. At the end of backward (an autograd callback) the
// reducer waits for every bucket and writes the averaged gradients back.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "c10d/process_group.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace c10d {

struct ReducerOptions {
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  // Parameters that get no gradient in a step are tolerated (their slots are
  // reduced as zeros; their .grad stays unset). Otherwise such a step fails,
  // naming them.
  bool find_unused_parameters = false;
  // .grad becomes a view into its bucket (no copy in or out after the first step).
  bool gradient_as_bucket_view = false;
};

// Replaces the averaging all-reduce of a bucket: must leave the average of
// every rank's `bucket` in `bucket` once the returned work completes.
using CommHook = std::function<std::shared_ptr<Work>(ProcessGroup& group, Tensor& bucket)>;

class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  static std::shared_ptr<Reducer> create(std::vector<std::pair<std::string, Tensor>> named_params,
                                         std::shared_ptr<ProcessGroup> group, ReducerOptions options);

  // Off inside no_sync(): gradients only accumulate locally.
  void set_sync(bool on) { sync_ = on; }
  bool sync() const { return sync_; }
  void register_comm_hook(CommHook hook);
  // Parameter indices (in registration order) of each bucket, in launch order.
  std::vector<std::vector<size_t>> bucket_indices() const;

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // element offset of each parameter in flat
    Tensor flat;
    size_t pending = 0;
    std::shared_ptr<Work> work;
  };
  Reducer(std::vector<std::pair<std::string, Tensor>> named_params, std::shared_ptr<ProcessGroup> group,
          ReducerOptions options);
  void install_hooks();
  void on_grad_ready(size_t index);
  void launch_ready_buckets();
  void launch(Bucket& b);
  void finalize();
  void reset_pass();
  Tensor slot(size_t index) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  std::shared_ptr<ProcessGroup> group_;
  ReducerOptions options_;
  CommHook hook_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_in_bucket_;
  std::mutex mu_;
  bool sync_ = true;
  bool in_pass_ = false;
  std::vector<bool> ready_;
  size_t next_bucket_ = 0;
};

}  // namespace c10d
}  // namespace trainrun
