#include "tensor/graph_break.h"
#include "tensor/factories.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/allocator.h"
#include "tensor/cpu/pytorch_cpu_draws.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise.h"
#include "tensor/op_schemas.h"
#include "tensor/random_draw.h"
#include "tensor/reductions.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {

IntList contiguous_strides(const IntList& sizes) {
  IntList strides(sizes.size());
  int64_t s = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

Tensor empty_strided(const IntList& sizes, const IntList& strides, TensorOptions opts) {
  TR_CHECK(sizes.size() == strides.size(), ValueError, "empty_strided: {} sizes but {} strides", sizes.size(),
           strides.size());
  DType dtype = opts.dtype_or_default();
  int64_t extent = 1;  // 1 + the largest offset reachable
  bool any_zero = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    TR_CHECK(sizes[d] >= 0, ValueError, "empty: negative dimension {} in size {}", sizes[d], fmt::format("{}", sizes));
    if (sizes[d] == 0) any_zero = true;
    extent += (sizes[d] - 1) * strides[d];
  }
  size_t nbytes = any_zero ? 0 : static_cast<size_t>(extent * element_size(dtype));
  Storage storage = Storage::make(allocator_for(opts.device)->allocate(nbytes, opts.device), nbytes);
  Tensor t(intrusive_ptr<TensorImpl>::make(storage, dtype, sizes, strides, 0));
  note_tensor_allocated(t);  // (graph capture: tensor/graph_break.h)
  return t;
}

Tensor empty(const IntList& sizes, TensorOptions opts) {
  return empty_strided(sizes, contiguous_strides(sizes), opts);
}

Tensor zeros(const IntList& sizes, TensorOptions opts) {
  Tensor t = empty(sizes, opts);
  return zero_(t);
}

Tensor ones(const IntList& sizes, TensorOptions opts) {
  if (!opts.dtype) opts.dtype = default_float_dtype();  // like zeros, not inferred from the integer 1
  return full(sizes, 1, opts);
}

Tensor full(const IntList& sizes, const Scalar& value, TensorOptions opts) {
  if (!opts.dtype) opts.dtype = value.is_floating() ? default_float_dtype() : value.dtype();
  Tensor t = empty(sizes, opts);
  return fill_(t, value);
}

Tensor scalar_tensor(const Scalar& v, TensorOptions opts) { return full({}, v, opts); }

template <>
Tensor tensor<bool>(const std::vector<bool>& values, IntList sizes) {
  if (sizes.empty() && values.size() != 1) sizes = {static_cast<int64_t>(values.size())};
  Tensor t = empty(sizes, DType::Bool);
  TR_CHECK(t.numel() == static_cast<int64_t>(values.size()), ValueError, "tensor(): {} values do not fill shape {}",
           values.size(), t.shape_str());
  bool* p = t.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

Tensor arange(const Scalar& end, TensorOptions opts) { return arange(0, end, 1, opts); }

namespace {

// While a graph capture records (compile/graph_capture.h sets the Tracing key on this thread), arange and
// linspace are made of dispatched ops, so that a recording replays their values (their direct loops below write
// memory no op is recorded for) and their length stays an allocation's size. The values equal the loops'.
bool recording() { return tls_included_keys().has(DispatchKey::Tracing); }

// 0, 1, ..., n - 1 as int64: a cumulative sum of ones.
Tensor recorded_indices(int64_t n) { return sub(cumsum(full({n}, 1, TensorOptions(DType::Int64)), 0), 1); }

// A double-precision result as the loops store it: through opmath_t<T> (float for the 16-bit floats).
Tensor stored_as(const Tensor& v, DType dtype) {
  if (dtype == DType::Float16 || dtype == DType::BFloat16) return to(to(v, DType::Float32), dtype);
  return v.dtype() == dtype ? v : to(v, dtype);
}

}  // namespace

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions opts) {
  bool all_int = !start.is_floating() && !end.is_floating() && !step.is_floating();
  if (!opts.dtype) opts.dtype = all_int ? DType::Int64 : default_float_dtype();
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  TR_CHECK(st != 0, ValueError, "arange: step must be non-zero");
  TR_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, "arange: start ({}) and end ({}) must be finite", s, e);
  TR_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
           "arange: upper bound and larger bound inconsistent with step sign (start={}, end={}, step={})", s, e, st);
  if (!opts.device.is_cpu()) {
    // Built on the CPU, then copied: the values are exactly the CPU's.
    Device device = opts.device;
    opts.device = Device();
    return to(arange(start, end, step, opts), device);
  }
  int64_t n = all_int ? (end.to_int() - start.to_int() + step.to_int() + (step.to_int() > 0 ? -1 : 1)) / step.to_int()
                      : static_cast<int64_t>(std::ceil((e - s) / st));
  if (recording()) {
    const Tensor i = recorded_indices(n);
    if (all_int) return stored_as(add(mul(i, step.to_int()), start.to_int()), opts.dtype_or_default());
    return stored_as(add(mul(to(i, DType::Float64), st), s), opts.dtype_or_default());  // (s + i * st, in double)
  }
  Tensor out = empty({n}, opts);
  visit_dtype(out.dtype(), "arange", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    if (all_int) {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start.to_int() + i * step.to_int());
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<opmath_t<T>>(s + i * st));
    }
  });
  return out;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  TR_CHECK(steps >= 0, ValueError, "linspace: number of steps must be non-negative, got {}", steps);
  if (!opts.device.is_cpu()) {
    Device device = opts.device;
    opts.device = Device();
    return to(linspace(start, end, steps, opts), device);
  }
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
  if (recording()) {  // (the loop's two halves: start + step * i, and end - step * (steps - 1 - i) exactly negated)
    const Tensor i = to(recorded_indices(steps), DType::Float64);
    const Tensor v = where(lt(i, static_cast<double>(steps / 2)), add(mul(i, step), start),
                           add(mul(sub(i, static_cast<double>(steps - 1)), step), end));
    return stored_as(v, opts.dtype_or_default());
  }
  Tensor out = empty({steps}, opts);
  visit_dtype(out.dtype(), "linspace", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    // Fill from both ends, as PyTorch does, so the last value is exactly `end`.
    int64_t half = steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      double v = i < half ? start + step * i : end - step * (steps - 1 - i);
      p[i] = static_cast<T>(static_cast<opmath_t<T>>(v));
    }
  });
  return out;
}

Tensor eye(int64_t n, int64_t m, TensorOptions opts) {
  if (m < 0) m = n;
  TR_CHECK(n >= 0, ValueError, "eye: n must be non-negative, got {}", n);
  Tensor out = zeros({n, m}, opts);
  Tensor diag = diagonal(out);
  fill_(diag, 1);
  return out;
}

Tensor empty_like(const Tensor& t, std::optional<DType> dtype) {
  return empty(t.sizes(), TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype) {
  return zeros(t.sizes(), TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor ones_like(const Tensor& t, std::optional<DType> dtype) {
  return full(t.sizes(), 1, TensorOptions(dtype.value_or(t.dtype()), t.device()));
}
Tensor full_like(const Tensor& t, const Scalar& v, std::optional<DType> dtype) {
  return full(t.sizes(), v, TensorOptions(dtype.value_or(t.dtype()), t.device()));
}

Tensor from_blob(void* data, const IntList& sizes, const IntList& strides, DType dtype,
                 std::function<void(void*)> deleter, Device device) {
  int64_t extent = 1;
  for (size_t d = 0; d < sizes.size(); ++d) extent += (sizes[d] - 1) * strides[d];
  size_t nbytes = static_cast<size_t>(std::max<int64_t>(extent, 0) * element_size(dtype));
  Storage storage = Storage::make(DataPtr(data, std::move(deleter), device), nbytes);
  return Tensor(intrusive_ptr<TensorImpl>::make(storage, dtype, sizes, strides, 0));
}

// ---- random ----
namespace {

using Distribution = RandomDistribution;

// Draws into `out` on its own device: on the CPU from gen's Mersenne Twister as PyTorch draws
// (tensor/cpu/pytorch_cpu_draws.h), elsewhere from its Philox counters (tensor/random_draw.h). The counters are
// reserved either way: a compiled replay asks for the same draw by them.
void fill_random(Tensor& out, Distribution dist, double a, double b, Generator* gen) {
  if (gen == nullptr) gen = &default_generator();
  // A strided CPU tensor is drawn in the order PyTorch's iterator walks it: memory order (dims by decreasing
  // stride), through a contiguous tensor of its dims so ordered.
  std::vector<int64_t> order(static_cast<size_t>(out.dim()));
  for (int64_t d = 0; d < out.dim(); ++d) order[static_cast<size_t>(d)] = d;
  if (!out.is_contiguous() && out.device().is_cpu())
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return out.stride(x) > out.stride(y); });
  Tensor walked = out.is_contiguous() ? out : permute(out, order);
  Tensor target = out.is_contiguous() ? out : empty(walked.sizes(), TensorOptions(out.dtype(), out.device()));
  const uint64_t first = gen->reserve(static_cast<uint64_t>(target.numel()));
  const uint64_t key = gen->seed();
  {
    ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);  // a fill, not a graph op
    CpuDrawScope scope(gen, out.is_contiguous());
    ops::random_fill_::call(keys_of(target), target, static_cast<int64_t>(dist), a, b, key, first);
  }
  if (!target.is_same(out)) copy_(walked, target);
}

}  // namespace

Tensor& uniform_(Tensor& t, double from, double to, Generator* gen) {
  TR_CHECK(from <= to, ValueError, "uniform_: expects from <= to, got from={} to={}", from, to);
  TR_CHECK(is_floating(t.dtype()), TypeError, "uniform_: expected a floating tensor, got {}", dtype_name(t.dtype()));
  fill_random(t, Distribution::Uniform, from, to, gen);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  TR_CHECK(std >= 0, ValueError, "normal_: expects std >= 0, got {}", std);
  TR_CHECK(is_floating(t.dtype()), TypeError, "normal_: expected a floating tensor, got {}", dtype_name(t.dtype()));
  fill_random(t, Distribution::Normal, mean, std, gen);
  return t;
}

Tensor& bernoulli_(Tensor& t, double p, Generator* gen) {
  TR_CHECK(p >= 0 && p <= 1, ValueError, "bernoulli_: expects 0 <= p <= 1, got {}", p);
  fill_random(t, Distribution::Bernoulli, p, 0, gen);
  return t;
}

Tensor& random_(Tensor& t, int64_t low, int64_t high, Generator* gen) {
  TR_CHECK(low < high, ValueError, "random_: expects from < to, got from={} to={}", low, high);
  fill_random(t, Distribution::RandInt, static_cast<double>(low), static_cast<double>(high), gen);
  return t;
}

Tensor randperm(int64_t n, Generator* gen) {
  TR_CHECK(n >= 0, ValueError, "randperm: n must be non-negative, got {}", n);
  if (gen == nullptr) gen = &default_generator();
  Tensor out = empty({n}, TensorOptions(DType::Int64));
  std::lock_guard<std::mutex> lock(gen->mutex());
  permutation_pytorch_cpu(gen->cpu_engine(), n, static_cast<int64_t*>(out.data_ptr()));
  return out;
}

Tensor& random_piece_(Tensor& t, bool normal, double a, double b, const IntList& global_sizes, const IntList& offsets,
                      Generator* gen) {
  const char* op = normal ? "normal_" : "uniform_";
  TR_CHECK(is_floating(t.dtype()), TypeError, "{}: expected a floating tensor, got {}", op, dtype_name(t.dtype()));
  TR_CHECK(normal ? b >= 0 : a <= b, ValueError, "{}: invalid bounds ({}, {})", op, a, b);
  TR_CHECK(global_sizes.size() == static_cast<size_t>(t.dim()) && offsets.size() == global_sizes.size(), ValueError,
           "{}: a piece of shape {} needs one global size and one offset per dim, got {} and {}", op, t.shape_str(),
           fmt::format("{}", global_sizes), fmt::format("{}", offsets));
  for (int64_t d = 0; d < t.dim(); ++d)
    TR_CHECK(offsets[d] >= 0 && offsets[d] + t.size(d) <= global_sizes[d], ValueError,
             "{}: the piece of shape {} at offsets {} does not fit in the whole of shape {}", op, t.shape_str(),
             fmt::format("{}", offsets), fmt::format("{}", global_sizes));
  if (gen == nullptr) gen = &default_generator();
  int64_t total = 1;
  for (int64_t s : global_sizes) total *= s;
  const uint64_t first = gen->reserve(static_cast<uint64_t>(total));  // what the whole tensor's draw takes
  if (t.numel() == 0) return t;
  // The whole's elements are numbered row-major; the piece spans [lo, hi). On the CPU the engine runs through
  // the whole draw, keeping that span. With counters, element g of a draw reads block first + g / lanes, so a
  // span drawn from a lane-aligned start reproduces the whole's values.
  const IntList whole_strides = contiguous_strides(global_sizes);
  int64_t lo = 0, hi = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    lo += offsets[d] * whole_strides[d];
    hi += (t.size(d) - 1) * whole_strides[d];
  }
  hi += lo;
  const auto dist = normal ? Distribution::Normal : Distribution::Uniform;
  if (t.device().is_cpu()) {  // the span [lo, hi) of the whole draw from the Mersenne Twister, which moves past it all
    Tensor span = empty({hi - lo}, TensorOptions(t.dtype(), t.device()));
    DrawRequest request{dist, a, b, t.dtype(), total, /*contiguous=*/true};
    {
      std::lock_guard<std::mutex> lock(gen->mutex());
      draw_pytorch_cpu(gen->cpu_engine(), request, lo, hi, span.data_ptr());
    }
    copy_(t, as_strided(span, t.sizes(), whole_strides, 0));
    return t;
  }
  const int64_t lanes = random_uses_two_words(dist, t.dtype() == DType::Float64, a, b) ? 2 : 4;
  const int64_t skip = lo % lanes;
  Tensor span = empty({hi - lo + skip}, TensorOptions(t.dtype(), t.device()));
  {
    ExcludeDispatchKeyGuard no_autograd(DispatchKey::Autograd);
    ops::random_fill_::call(keys_of(span), span, static_cast<int64_t>(dist), a, b, gen->seed(),
                            first + static_cast<uint64_t>((lo - skip) / lanes));
  }
  copy_(t, as_strided(span, t.sizes(), whole_strides, skip));
  return t;
}

Tensor rand(const IntList& sizes, TensorOptions opts, Generator* gen) {
  Tensor t = empty(sizes, opts);
  return uniform_(t, 0, 1, gen);
}

Tensor randn(const IntList& sizes, TensorOptions opts, Generator* gen) {
  Tensor t = empty(sizes, opts);
  return normal_(t, 0, 1, gen);
}

Tensor randint(int64_t low, int64_t high, const IntList& sizes, TensorOptions opts, Generator* gen) {
  TR_CHECK(low < high, ValueError, "randint: expects low < high, got low={} high={}", low, high);
  Tensor t = empty(sizes, opts);
  return random_(t, low, high, gen);
}

Tensor rand_like(const Tensor& t, Generator* gen) { return rand(t.sizes(), TensorOptions(t.dtype(), t.device()), gen); }
Tensor randn_like(const Tensor& t, Generator* gen) { return randn(t.sizes(), TensorOptions(t.dtype(), t.device()), gen); }

}  // namespace trainrun
