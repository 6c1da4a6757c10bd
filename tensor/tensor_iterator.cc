#include "tensor/tensor_iterator.h"

#include <algorithm>
#include <numeric>

#include "tensor/factories.h"
#include "tensor/thread_pool.h"
#include "tensor/type_promotion.h"
#include "tensor/views.h"

namespace trainrun {

TensorIterator::TensorIterator(const IteratorConfig& config, const Tensor& out, std::vector<Tensor> inputs)
    : config_(config), user_out_(out) {
  TR_CHECK(!inputs.empty(), ValueError, "{}: no inputs", config.op);
  for (const Tensor& t : inputs) TR_CHECK(t.defined(), ValueError, "{}: an input tensor is undefined", config.op);
  // The device of the first input that is not a CPU scalar: 0-dim CPU tensors
  // (wrapped numbers) may join tensors of any device, as in PyTorch.
  Device device = inputs[0].device();
  for (const Tensor& t : inputs) {
    if (!(t.dim() == 0 && t.device().is_cpu())) {
      device = t.device();
      break;
    }
  }
  for (const Tensor& t : inputs) {
    TR_CHECK(t.device() == device || (t.dim() == 0 && t.device().is_cpu()), TypeError,
             "{}: expected all tensors on one device, got {} and {}", config.op, device.str(), t.device().str());
  }
  // 1. The dtype the op computes in.
  if (config.compute_dtype) {
    compute_dtype_ = *config.compute_dtype;
  } else {
    if (config.inputs_keeping_dtype == 0) {
      compute_dtype_ = result_type(inputs);
    } else {
      std::vector<Tensor> promoted(inputs.begin() + config.inputs_keeping_dtype, inputs.end());
      compute_dtype_ = result_type(promoted);
    }
    if (config.promote_integer_to_float && !is_floating(compute_dtype_)) compute_dtype_ = default_float_dtype();
  }
  // 2. Broadcast shape.
  if (config.shape_from_output) {
    TR_CHECK(out.defined(), ValueError, "{}: an in-place iterator needs its output", config.op);
    shape_ = out.sizes();
    for (const Tensor& t : inputs)
      TR_CHECK(broadcast_shapes(shape_, t.sizes(), config.op) == shape_, ValueError,
               "{}: an input of shape {} cannot be broadcast to the output's shape {}", config.op, t.shape_str(),
               out.shape_str());
  } else {
    shape_ = inputs[0].sizes();
    for (size_t i = 1; i < inputs.size(); ++i) shape_ = broadcast_shapes(shape_, inputs[i].sizes(), config.op);
  }
  numel_ = 1;
  for (int64_t s : shape_) numel_ *= s;
  // 3. Output: the caller's when it fits, else a new tensor.
  DType out_dtype = config.output_dtype.value_or(compute_dtype_);
  if (out.defined()) {
    if (out.sizes() != shape_) {
      TR_CHECK(out.numel() == 0, ValueError, "{}: out= has shape {} but the result has shape {}", config.op,
               out.shape_str(), fmt::format("{}", shape_));
      out.impl()->set_storage(empty(shape_, TensorOptions(out.dtype(), out.device())).impl()->storage());
      out.impl()->set_geometry(shape_, contiguous_strides(shape_), 0);
    }
    TR_CHECK(can_cast(out_dtype, out.dtype()), TypeError, "{}: result of dtype {} cannot be cast to out= dtype {}",
             config.op, dtype_name(out_dtype), dtype_name(out.dtype()));
    result_ = out.dtype() == out_dtype ? out : empty(shape_, TensorOptions(out_dtype, device));
  } else {
    result_ = empty(shape_, TensorOptions(out_dtype, device));
  }
  // 4. Inputs in the compute dtype.
  operands_.reserve(inputs.size() + 1);
  operands_.push_back(result_);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    bool keep = static_cast<int>(i) < config.inputs_keeping_dtype;
    if (keep || t.dtype() == compute_dtype_) {
      operands_.push_back(t);
    } else if (t.dim() == 0 && t.device().is_cpu() && device.is_cpu()) {
      // A number (x * 0.5): its value in the compute dtype, without a copy kernel through the dispatcher.
      operands_.push_back(scalar_tensor(t.item(), TensorOptions(compute_dtype_, device)));
    } else {
      operands_.push_back(to(t, compute_dtype_));
    }
  }
  build_strides();
}

// Whether every operand is either contiguous with the full shape or a single
// element broadcast everywhere: then the iteration space is one flat run and
// the general ordering and coalescing below (several small allocations, a
// sort) can be skipped. Most elementwise calls are of this kind.
bool TensorIterator::flat_run() {
  const int nops = static_cast<int>(operands_.size());
  for (const Tensor& t : operands_) {
    const bool full = t.sizes() == shape_ && t.is_contiguous();
    if (!full && t.numel() != 1) return false;
  }
  iter_sizes_.assign(1, numel_);
  iter_strides_.assign(1, std::vector<int64_t>(nops, 0));
  for (int op = 0; op < nops; ++op) {
    const Tensor& t = operands_[op];
    if (t.sizes() == shape_ && numel_ != 1) iter_strides_[0][op] = t.element_size();
  }
  return true;
}

void TensorIterator::build_strides() {
  if (flat_run()) return;
  const int64_t ndim = static_cast<int64_t>(shape_.size());
  const int nops = static_cast<int>(operands_.size());
  // Byte strides broadcast to shape_, outermost dim first.
  std::vector<std::vector<int64_t>> strides(ndim, std::vector<int64_t>(nops, 0));
  for (int op = 0; op < nops; ++op) {
    const Tensor& t = operands_[op];
    int64_t offset = ndim - t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (t.size(d) != 1) strides[d + offset][op] = t.stride(d) * t.element_size();
    }
  }
  // Order dims innermost-first by the output's strides (then the inputs'),
  // so that the innermost run is the most contiguous one.
  std::vector<int64_t> perm(ndim);
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());  // default: row-major, last dim innermost
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    for (int op = 0; op < nops; ++op) {
      int64_t sa = std::abs(strides[a][op]), sb = std::abs(strides[b][op]);
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa < sb;
    }
    return false;
  });
  iter_sizes_.clear();
  iter_strides_.clear();
  for (int64_t d : perm) {
    if (shape_[d] == 1) continue;
    if (!iter_sizes_.empty()) {
      // Merge with the previous (inner) dim when every operand steps evenly.
      bool can_merge = true;
      for (int op = 0; op < nops && can_merge; ++op)
        can_merge = strides[d][op] == iter_strides_.back()[op] * iter_sizes_.back();
      if (can_merge) {
        iter_sizes_.back() *= shape_[d];
        continue;
      }
    }
    iter_sizes_.push_back(shape_[d]);
    iter_strides_.push_back(strides[d]);
  }
  if (iter_sizes_.empty()) {  // 0-dim or all-ones: one element
    iter_sizes_.push_back(1);
    iter_strides_.push_back(std::vector<int64_t>(nops, 0));
  }
}

void TensorIterator::for_each(ElementwiseLoop loop, int64_t grain) {
  if (numel_ == 0) return;
  const int nops = static_cast<int>(operands_.size());
  const int64_t ndim = static_cast<int64_t>(iter_sizes_.size());
  // One flat run on this thread (small tensors): one call, nothing allocated.
  constexpr int kMaxInlineOperands = 8;
  if (ndim == 1 && nops <= kMaxInlineOperands && numel_ <= (grain > 0 ? grain : kElementwiseGrain)) {
    char* ptrs[kMaxInlineOperands];
    int64_t strides[kMaxInlineOperands];
    for (int op = 0; op < nops; ++op) {
      ptrs[op] = static_cast<char*>(operands_[op].data_ptr());
      strides[op] = iter_strides_[0][op];
    }
    loop(ptrs, strides, numel_);
    return;
  }
  std::vector<char*> base(nops);
  for (int op = 0; op < nops; ++op) base[op] = static_cast<char*>(operands_[op].data_ptr());
  std::vector<int64_t> inner_strides(nops);
  for (int op = 0; op < nops; ++op) inner_strides[op] = iter_strides_[0][op];
  const int64_t inner = iter_sizes_[0];

  auto run_range = [&](int64_t begin, int64_t end) {
    // Multi-index of `begin`, innermost first, and the operands' pointers there; then each row's pointers
    // follow from the last's by the strides (odometer steps: a permuted copy's rows are 32 floats, and working
    // a row's pointers out from its index anew cost more than the row).
    std::vector<int64_t> idx(ndim);
    int64_t rem = begin;
    for (int64_t d = 0; d < ndim; ++d) { idx[d] = rem % iter_sizes_[d]; rem /= iter_sizes_[d]; }
    std::vector<char*> ptrs(nops);
    for (int op = 0; op < nops; ++op) {
      char* p = base[op];
      for (int64_t d = 0; d < ndim; ++d) p += idx[d] * iter_strides_[d][op];
      ptrs[op] = p;
    }
    while (begin < end) {
      const int64_t n = std::min(inner - idx[0], end - begin);
      loop(ptrs.data(), inner_strides.data(), n);
      begin += n;
      idx[0] += n;
      for (int op = 0; op < nops; ++op) ptrs[op] += n * inner_strides[op];
      for (int64_t d = 0; d + 1 < ndim && idx[d] == iter_sizes_[d]; ++d) {
        idx[d] = 0;
        ++idx[d + 1];
        for (int op = 0; op < nops; ++op)
          ptrs[op] += iter_strides_[d + 1][op] - iter_sizes_[d] * iter_strides_[d][op];
      }
    }
  };
  parallel_for(0, numel_, grain > 0 ? grain : kElementwiseGrain, run_range);
}

Tensor TensorIterator::output() {
  if (user_out_.defined() && !user_out_.is_same(result_)) {
    copy_(user_out_, result_);
    return user_out_;
  }
  return result_;
}

}  // namespace trainrun
