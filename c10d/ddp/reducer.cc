#include "c10d/ddp/reducer.h"

#include <algorithm>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/dispatcher.h"
#include "tensor/ops.h"

namespace trainrun {
namespace c10d {

std::shared_ptr<Reducer> Reducer::create(std::vector<std::pair<std::string, Tensor>> named_params,
                                         std::shared_ptr<ProcessGroup> group, ReducerOptions options) {
  std::shared_ptr<Reducer> r(new Reducer(std::move(named_params), std::move(group), options));
  r->install_hooks();
  return r;
}

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> named_params, std::shared_ptr<ProcessGroup> group,
                 ReducerOptions options)
    : group_(std::move(group)), options_(options) {
  for (auto& [name, p] : named_params)
    if (requires_grad(p)) params_.emplace_back(name, p);
  TR_CHECK(!params_.empty(), ValueError, "DistributedDataParallel: the module has no parameter that requires grad");
  TR_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_mb > 0, ValueError,
           "DistributedDataParallel: bucket sizes must be positive (bucket_cap_mb {}, first bucket {} MB)",
           options_.bucket_cap_mb, options_.first_bucket_mb);
  // Reverse registration order; a bucket holds one dtype and closes at its cap.
  bucket_of_.assign(params_.size(), 0);
  slot_in_bucket_.assign(params_.size(), 0);
  Bucket current;
  int64_t bytes = 0;
  DType dtype = params_.back().second.dtype();
  auto close = [&] {
    if (current.params.empty()) return;
    int64_t numel = 0;
    for (size_t i : current.params) {
      current.offsets.push_back(numel);
      numel += params_[i].second.numel();
    }
    const Tensor& first = params_[current.params.front()].second;
    current.flat = zeros({numel}, TensorOptions(first.dtype(), first.device()));
    for (size_t k = 0; k < current.params.size(); ++k) {
      bucket_of_[current.params[k]] = buckets_.size();
      slot_in_bucket_[current.params[k]] = k;
    }
    buckets_.push_back(std::move(current));
    current = Bucket();
    bytes = 0;
  };
  for (size_t i = params_.size(); i-- > 0;) {
    const Tensor& p = params_[i].second;
    TR_CHECK(p.device().is_cpu() || p.device() == params_[0].second.device(), ValueError,
             "DistributedDataParallel: parameters must all be on one device");
    const double cap_mb = buckets_.empty() ? options_.first_bucket_mb : options_.bucket_cap_mb;
    if (!current.params.empty() &&
        (p.dtype() != dtype || static_cast<double>(bytes + p.nbytes()) > cap_mb * 1024 * 1024))
      close();
    dtype = p.dtype();
    current.params.push_back(i);
    bytes += p.nbytes();
  }
  close();
  ready_.assign(params_.size(), false);
  reset_pass();
}

void Reducer::install_hooks() {
  std::weak_ptr<Reducer> weak = shared_from_this();
  for (size_t i = 0; i < params_.size(); ++i) {
    register_post_accumulate_grad_hook(params_[i].second, [weak, i](const Tensor&) {
      if (auto self = weak.lock()) self->on_grad_ready(i);
    });
  }
}

void Reducer::register_comm_hook(CommHook hook) {
  TR_CHECK(!hook_, Error,
           "register_comm_hook or register_builtin_comm_hook can only be called once (DistributedDataParallel: a "
           "communication hook is already registered)");
  hook_ = std::move(hook);
}

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

Tensor Reducer::slot(size_t index) const {
  const Bucket& b = buckets_[bucket_of_[index]];
  const Tensor& p = params_[index].second;
  return reshape(narrow(b.flat, 0, b.offsets[slot_in_bucket_[index]], p.numel()), p.sizes());
}

void Reducer::reset_pass() {
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_bucket_ = 0;
  in_pass_ = false;
}

void Reducer::on_grad_ready(size_t index) {
  if (!sync_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!in_pass_) {
    in_pass_ = true;
    std::weak_ptr<Reducer> weak = shared_from_this();
    autograd::queue_callback([weak] {
      if (auto self = weak.lock()) self->finalize();
    });
  }
  if (ready_[index]) return;  // a parameter used twice reports once per pass
  ready_[index] = true;
  NoGradGuard no_grad;
  const Tensor& p = params_[index].second;
  Tensor g = grad(p);
  Tensor s = slot(index);
  if (g.data_ptr() != s.data_ptr()) {
    copy_(s, g);
    // Later steps accumulate straight into the bucket.
    if (options_.gradient_as_bucket_view) set_grad(p, s);
  }
  Bucket& b = buckets_[bucket_of_[index]];
  if (--b.pending == 0) launch_ready_buckets();
}

void Reducer::launch(Bucket& b) { b.work = hook_ ? hook_(*group_, b.flat) : group_->allreduce(b.flat, ReduceOp::AVG); }

void Reducer::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) launch(buckets_[next_bucket_++]);
}

void Reducer::finalize() {
  std::lock_guard<std::mutex> lock(mu_);
  struct ResetOnExit {
    Reducer* r;
    ~ResetOnExit() { r->reset_pass(); }
  } reset{this};
  NoGradGuard no_grad;
  std::vector<std::string> unused;
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) unused.push_back(params_[i].first);
  if (!unused.empty()) {
    TR_CHECK(options_.find_unused_parameters, ValueError,
             "DistributedDataParallel: parameters [{}] received no gradient in this backward pass, so their "
             "buckets could not be reduced. Pass find_unused_parameters=true if the forward does not use every "
             "parameter on every step",
             fmt::join(unused, ", "));
    // Their slots go in as zeros (every rank must reduce every bucket).
    for (size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i]) continue;
      Tensor s = slot(i);
      s.zero_();
      if (--buckets_[bucket_of_[i]].pending == 0) launch_ready_buckets();
    }
  }
  launch_ready_buckets();
  for (Bucket& b : buckets_) b.work->wait();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!ready_[i]) continue;
    const Tensor& p = params_[i].second;
    Tensor s = slot(i);
    Tensor g = grad(p);
    if (g.data_ptr() != s.data_ptr()) copy_(g, s);
  }
}

}  // namespace c10d
}  // namespace trainrun
