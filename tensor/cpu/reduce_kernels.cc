// CPU reductions. Every reduction works on the contiguous rows of a
// ReducePlan; float sums use a blocked, pairwise (cascade) summation so that
// 16M float32 values sum with a relative error near 1e-7, not 1e-3. Those
// that keep trailing dims read the tensor in place instead (reduce_columns.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "tensor/cpu/reduce_columns.h"
#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/reduce_plan.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

template <typename T> struct acc_type { using type = opmath_t<T>; };
template <> struct acc_type<bool> { using type = int64_t; };
template <> struct acc_type<uint8_t> { using type = int64_t; };
template <> struct acc_type<int8_t> { using type = int64_t; };
template <> struct acc_type<int16_t> { using type = int64_t; };
template <> struct acc_type<int32_t> { using type = int64_t; };
template <typename T> using acc_t = typename acc_type<T>::type;

// Pairwise sum of f(x[i]) over [0, n): blocks of 1024 summed with 16
// independent accumulators (vectorizable without reassociation), then
// halves combined recursively.
template <typename T, typename Acc, typename F>
Acc cascade_sum(const T* x, int64_t n, F f) {
  constexpr int64_t kBlock = 1024;
  if (n <= kBlock) {
    Acc acc[16] = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      for (int j = 0; j < 16; ++j) acc[j] += f(static_cast<Acc>(x[i + j]));
    Acc tail = 0;
    for (; i < n; ++i) tail += f(static_cast<Acc>(x[i]));
    for (int w = 8; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return acc[0] + tail;
  }
  int64_t half = (n / 2 + kBlock - 1) / kBlock * kBlock;
  return cascade_sum<T, Acc>(x, half, f) + cascade_sum<T, Acc>(x + half, n - half, f);
}

// Runs row_fn(row_index, row_ptr) over every row, in parallel.
template <typename T, typename F>
void for_each_row(const ReducePlan& plan, F row_fn) {
  const T* base = static_cast<const T*>(plan.rows.data_ptr());
  int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(plan.inner, 1));
  parallel_for(0, plan.outer, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) row_fn(r, base + r * plan.inner);
  });
}

// Sum of f(x) over each row into out (dtype Out). A single long row is cut
// into fixed 64K-element pieces summed in parallel and combined pairwise:
// the pieces do not depend on the thread count, so neither does the result.
template <typename T, typename Out, typename F>
void sum_rows(const ReducePlan& plan, Tensor& out, F f, double scale) {
  using Acc = acc_t<T>;
  Out* o = static_cast<Out*>(out.data_ptr());
  constexpr int64_t kPiece = int64_t(1) << 16;
  if (plan.outer == 1 && plan.inner > 4 * kPiece) {
    const T* x = static_cast<const T*>(plan.rows.data_ptr());
    const int64_t npieces = (plan.inner + kPiece - 1) / kPiece;
    std::vector<Acc> partial(npieces, Acc(0));
    parallel_for(0, npieces, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c)
        partial[c] = cascade_sum<T, Acc>(x + c * kPiece, std::min(kPiece, plan.inner - c * kPiece), f);
    });
    for (int64_t width = 1; width < npieces; width *= 2)
      for (int64_t i = 0; i + width < npieces; i += 2 * width) partial[i] += partial[i + width];
    o[0] = static_cast<Out>(static_cast<opmath_t<Out>>(partial[0] * scale));
    return;
  }
  for_each_row<T>(plan, [&](int64_t r, const T* row) {
    Acc s = cascade_sum<T, Acc>(row, plan.inner, f);
    o[r] = static_cast<Out>(static_cast<opmath_t<Out>>(scale == 1.0 ? s : s * scale));
  });
}

// How many leading dims `dims` reduce when they are exactly 0..k-1 (0 < k < x.dim()), else 0.
int64_t leading_reduced_dims(const Tensor& x, const IntList& dims) {
  const int64_t nd = x.dim();
  if (dims.empty() || nd < 2) return 0;
  const std::optional<std::vector<bool>> reduced = reduced_dims(nd, dims);
  if (!reduced) return 0;  // (the rows plan reports the error)
  const int64_t k = static_cast<int64_t>(dims.size());
  for (int64_t d = 0; d < k; ++d)
    if (!(*reduced)[d]) return 0;
  return k < nd ? k : 0;
}

// Whether x's memory is [rows, cols] rows of its trailing dims from `k` on, contiguous, with its leading k dims
// in any order among themselves: a permuted gradient ([B, T, C] from a [T, B, C] layout), whose sum over its
// leading dims adds the same rows, only in another order.
bool leading_dims_are_rows(const Tensor& x, int64_t k) {
  const IntList& sizes = x.sizes();
  const IntList& strides = x.strides();
  int64_t expected = 1;
  for (int64_t d = x.dim() - 1; d >= k; --d) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  IntList leading;
  for (int64_t d = 0; d < k; ++d)
    if (sizes[d] != 1) leading.push_back(d);
  std::sort(leading.begin(), leading.end(), [&](int64_t a, int64_t b) { return strides[a] < strides[b]; });
  for (int64_t d : leading) {
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// A contiguous float tensor reduced over every dim but one run of consecutive dims in the middle (a
// BatchNorm's per-channel statistics over N, H, W) is [outer, mid, inner]: output m reduces `outer` rows of
// `inner` contiguous elements. Reading those rows in place saves the rows plan's transposing copy.
using MiddleRun = BlockSplit;

std::optional<MiddleRun> middle_run(const Tensor& x, const IntList& dims, bool keepdim) {
  return block_split(x, dims, keepdim, /*reduce_middle=*/false, /*outer_may_be_empty=*/false);
}

// Per output m, the pairwise sum over the outer rows of f(row) (one row's reduction).
template <typename Acc, typename RowFn>
Acc sum_over_rows(const MiddleRun& run, int64_t m, std::vector<Acc>& partial, RowFn row_sum) {
  for (int64_t r = 0; r < run.outer; ++r) partial[r] = row_sum((r * run.mid + m) * run.inner);
  for (int64_t width = 1; width < run.outer; width *= 2)
    for (int64_t r = 0; r + width < run.outer; r += 2 * width) partial[r] += partial[r + width];
  return partial[0];
}

template <typename T>
void sum_middle_run(const MiddleRun& run, const T* x, T* o, double scale) {
  using Acc = acc_t<T>;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(run.outer * run.inner, 1));
  parallel_for(0, run.mid, grain, [&](int64_t m0, int64_t m1) {
    std::vector<Acc> partial(static_cast<size_t>(run.outer));
    for (int64_t m = m0; m < m1; ++m) {
      const Acc s = sum_over_rows<Acc>(run, m, partial, [&](int64_t at) {
        return cascade_sum<T, Acc>(x + at, run.inner, [](Acc v) { return v; });
      });
      o[m] = static_cast<T>(scale == 1.0 ? s : static_cast<Acc>(s * scale));
    }
  });
}

Tensor sum_like_cpu(const Tensor& x_in, const IntList& dims, bool keepdim, std::optional<DType> dtype, bool mean) {
  const char* op = mean ? "mean" : "sum";
  DType out_dtype = sum_dtype(x_in.dtype(), dtype);
  TR_CHECK(!mean || is_floating(out_dtype), Error,
           "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
           "Got: {}",
           dtype_name(out_dtype));
  // A requested dtype is also the accumulation dtype, as in PyTorch.
  Tensor x = dtype && *dtype != x_in.dtype() ? x_in.to(*dtype) : x_in;
  if (const int64_t k = leading_reduced_dims(x, dims);
      k > 0 && leading_dims_are_rows(x, k) && (x.dtype() == DType::Float32 || x.dtype() == DType::Float64) &&
      out_dtype == x.dtype()) {
    int64_t rows = 1, cols = 1;
    IntList out_shape;
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d < k) {
        rows *= x.sizes()[d];
        if (keepdim) out_shape.push_back(1);
      } else {
        cols *= x.sizes()[d];
        out_shape.push_back(x.sizes()[d]);
      }
    }
    Tensor out = empty(out_shape, out_dtype);
    const double scale = !mean ? 1.0 : rows == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / rows;
    ColumnBlocks one;  // (one block: its rows in whatever order the leading dims lay them out)
    one.mid = rows;
    one.inner = cols;
    sum_columns(one, x, x.data_ptr(), out, scale);
    return out;
  }
  if (const std::optional<ColumnBlocks> b = column_blocks(x, dims, keepdim); b && out_dtype == x.dtype()) {
    Tensor out = empty(b->out_shape, out_dtype);
    sum_columns(*b, x, x.data_ptr(), out, mean ? 1.0 / static_cast<double>(b->mid) : 1.0);
    return out;
  }
  if (const std::optional<MiddleRun> run = middle_run(x, dims, keepdim); run && out_dtype == x.dtype()) {
    Tensor out = empty(run->out_shape, out_dtype);
    const double scale = mean ? 1.0 / static_cast<double>(run->outer * run->inner) : 1.0;
    if (x.dtype() == DType::Float32)
      sum_middle_run<float>(*run, x.data<float>(), out.data<float>(), scale);
    else
      sum_middle_run<double>(*run, x.data<double>(), out.data<double>(), scale);
    return out;
  }
  ReducePlan plan(x, dims, keepdim, op);
  Tensor out = empty(plan.out_shape, out_dtype);
  double scale = mean ? 1.0 / static_cast<double>(plan.inner) : 1.0;
  if (mean && plan.inner == 0) scale = std::numeric_limits<double>::quiet_NaN();
  visit_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using Acc = acc_t<T>;
    visit_dtype(out_dtype, op, [&](auto otag) {
      using Out = decltype(otag);
      if constexpr (std::is_same<Out, bool>::value) {
        throw TypeError(fmt::format("{}: bool output dtype is not supported", op));
      } else {
        sum_rows<T, Out>(plan, out, [](Acc v) { return v; }, scale);
      }
    });
  });
  return out;
}

Tensor sum_cpu(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like_cpu(x, dims, keepdim, dtype, false);
}
Tensor mean_cpu(const Tensor& x, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_like_cpu(x, dims, keepdim, dtype, true);
}

Tensor prod_cpu(const Tensor& x_in, const IntList& dims, bool keepdim, std::optional<DType> dtype) {
  DType out_dtype = sum_dtype(x_in.dtype(), dtype);
  Tensor x = x_in.dtype() != out_dtype ? x_in.to(out_dtype) : x_in;
  ReducePlan plan(x, dims, keepdim, "prod");
  Tensor out = empty(plan.out_shape, out_dtype);
  visit_numeric_dtype(out_dtype, "prod", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    T* o = out.data<T>();
    for_each_row<T>(plan, [&](int64_t r, const T* row) {
      Acc p = 1;
      for (int64_t i = 0; i < plan.inner; ++i) p *= static_cast<Acc>(row[i]);
      o[r] = static_cast<T>(p);
    });
  });
  return out;
}

// Index of the max (or min) of a row: first occurrence; NaN wins.
template <bool is_max, typename T>
int64_t arg_extreme(const T* row, int64_t n) {
  using Acc = opmath_t<T>;
  int64_t best = 0;
  Acc bv = static_cast<Acc>(row[0]);
  if (bv != bv) return 0;
  for (int64_t i = 1; i < n; ++i) {
    Acc v = static_cast<Acc>(row[i]);
    if (v != v) return i;
    if (is_max ? v > bv : v < bv) { bv = v; best = i; }
  }
  return best;
}

template <bool is_max>
Tensor amax_cpu(const Tensor& x, const IntList& dims, bool keepdim) {
  const char* op = is_max ? "amax" : "amin";
  if (const std::optional<ColumnBlocks> b = column_blocks(x, dims, keepdim); b && b->mid > 0) {
    Tensor out = empty(b->out_shape, x.dtype());
    extreme_columns(*b, x, out, is_max);
    return out;
  }
  ReducePlan plan(x, dims, keepdim, op);
  check_nonempty(plan, op);
  Tensor out = empty(plan.out_shape, x.dtype());
  visit_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data_ptr());
    for_each_row<T>(plan, [&](int64_t r, const T* row) { o[r] = row[arg_extreme<is_max>(row, plan.inner)]; });
  });
  return out;
}

template <bool is_max>
std::tuple<Tensor, Tensor> max_dim_cpu(const Tensor& x, int64_t dim, bool keepdim) {
  const char* op = is_max ? "max" : "min";
  ReducePlan plan(x, {dim}, keepdim, op);
  check_nonempty(plan, op);
  Tensor values = empty(plan.out_shape, x.dtype());
  Tensor indices = empty(plan.out_shape, DType::Int64);
  int64_t* idx = indices.data<int64_t>();
  visit_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(values.data_ptr());
    for_each_row<T>(plan, [&](int64_t r, const T* row) {
      idx[r] = arg_extreme<is_max>(row, plan.inner);
      o[r] = row[idx[r]];
    });
  });
  return {values, indices};
}

template <bool is_max>
Tensor argmax_cpu(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  const char* op = is_max ? "argmax" : "argmin";
  Tensor src = dim ? x : reshape(x, {-1});
  ReducePlan plan(src, dim ? IntList{*dim} : IntList{}, keepdim && dim.has_value(), op);
  check_nonempty(plan, op);
  IntList shape = plan.out_shape;
  if (!dim && keepdim) shape = IntList(x.dim(), 1);
  Tensor out = empty(shape, DType::Int64);
  int64_t* o = out.data<int64_t>();
  visit_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    for_each_row<T>(plan, [&](int64_t r, const T* row) { o[r] = arg_extreme<is_max>(row, plan.inner); });
  });
  return out;
}

Tensor var_cpu(const Tensor& x, const IntList& dims, int64_t correction, bool keepdim) {
  TR_CHECK(is_floating(x.dtype()), TypeError, "var: expected a floating point tensor, got {}", dtype_name(x.dtype()));
  if (const std::optional<MiddleRun> run = middle_run(x, dims, keepdim)) {
    Tensor out = empty(run->out_shape, x.dtype());
    visit_float_dtype(x.dtype(), "var", [&](auto tag) {
      using T = decltype(tag);
      const T* px = x.data<T>();
      T* o = out.data<T>();
      const int64_t n = run->outer * run->inner;
      const double denom = static_cast<double>(n - correction);
      const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
      parallel_for(0, run->mid, grain, [&](int64_t m0, int64_t m1) {
        std::vector<double> partial(static_cast<size_t>(run->outer));
        for (int64_t m = m0; m < m1; ++m) {  // the rows' two passes, as below
          const double mean = sum_over_rows<double>(*run, m, partial, [&](int64_t at) {
            return cascade_sum<T, double>(px + at, run->inner, [](double v) { return v; });
          }) / static_cast<double>(n);
          const double ss = sum_over_rows<double>(*run, m, partial, [&](int64_t at) {
            return cascade_sum<T, double>(px + at, run->inner, [mean](double v) { return (v - mean) * (v - mean); });
          });
          o[m] = static_cast<T>(denom <= 0 ? std::numeric_limits<double>::quiet_NaN() : ss / denom);
        }
      });
    });
    return out;
  }
  ReducePlan plan(x, dims, keepdim, "var");
  Tensor out = empty(plan.out_shape, x.dtype());
  visit_float_dtype(x.dtype(), "var", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for_each_row<T>(plan, [&](int64_t r, const T* row) {
      // Two passes in double: exact enough without Welford's divisions.
      double mean = cascade_sum<T, double>(row, plan.inner, [](double v) { return v; }) / plan.inner;
      double ss = cascade_sum<T, double>(row, plan.inner, [mean](double v) { return (v - mean) * (v - mean); });
      double denom = static_cast<double>(plan.inner - correction);
      o[r] = static_cast<T>(static_cast<opmath_t<T>>(denom <= 0 ? std::numeric_limits<double>::quiet_NaN() : ss / denom));
    });
  });
  return out;
}

Tensor norm_cpu(const Tensor& x, double p, const IntList& dims, bool keepdim) {
  TR_CHECK(is_floating(x.dtype()), TypeError, "norm: expected a floating point tensor, got {}", dtype_name(x.dtype()));
  ReducePlan plan(x, dims, keepdim, "norm");
  Tensor out = empty(plan.out_shape, x.dtype());
  visit_float_dtype(x.dtype(), "norm", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for_each_row<T>(plan, [&](int64_t r, const T* row) {
      double v;
      if (std::isinf(p)) {
        double m = p > 0 ? 0 : std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < plan.inner; ++i) {
          double a = std::abs(static_cast<double>(static_cast<opmath_t<T>>(row[i])));
          if (a != a) { m = a; break; }
          m = p > 0 ? std::max(m, a) : std::min(m, a);
        }
        v = m;
      } else if (p == 0) {
        v = cascade_sum<T, double>(row, plan.inner, [](double a) { return a != 0 ? 1.0 : 0.0; });
      } else if (p == 1) {
        v = cascade_sum<T, double>(row, plan.inner, [](double a) { return std::abs(a); });
      } else if (p == 2) {
        v = std::sqrt(cascade_sum<T, double>(row, plan.inner, [](double a) { return a * a; }));
      } else {
        v = std::pow(cascade_sum<T, double>(row, plan.inner, [p](double a) { return std::pow(std::abs(a), p); }), 1.0 / p);
      }
      o[r] = static_cast<T>(static_cast<opmath_t<T>>(v));
    });
  });
  return out;
}

Tensor logsumexp_cpu(const Tensor& x_in, const IntList& dims, bool keepdim) {
  Tensor x = is_floating(x_in.dtype()) ? x_in : x_in.to(default_float_dtype());
  ReducePlan plan(x, dims, keepdim, "logsumexp");
  Tensor out = empty(plan.out_shape, x.dtype());
  visit_float_dtype(x.dtype(), "logsumexp", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    for_each_row<T>(plan, [&](int64_t r, const T* row) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < plan.inner; ++i) m = std::max(m, static_cast<double>(static_cast<opmath_t<T>>(row[i])));
      double v;
      if (std::isinf(m)) {
        v = m;  // all -inf gives -inf; any +inf gives +inf
      } else {
        v = m + std::log(cascade_sum<T, double>(row, plan.inner, [m](double a) { return std::exp(a - m); }));
      }
      o[r] = static_cast<T>(static_cast<opmath_t<T>>(v));
    });
  });
  return out;
}

template <bool is_all>
Tensor all_cpu(const Tensor& x, const IntList& dims, bool keepdim) {
  const char* op = is_all ? "all" : "any";
  ReducePlan plan(x, dims, keepdim, op);
  Tensor out = empty(plan.out_shape, DType::Bool);
  bool* o = out.data<bool>();
  visit_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    for_each_row<T>(plan, [&](int64_t r, const T* row) {
      bool v = is_all;
      for (int64_t i = 0; i < plan.inner; ++i) {
        if ((static_cast<Acc>(row[i]) != Acc(0)) != is_all) { v = !is_all; break; }
      }
      o[r] = v;
    });
  });
  return out;
}

Tensor cumsum_cpu(const Tensor& x_in, int64_t dim, std::optional<DType> dtype) {
  DType out_dtype = sum_dtype(x_in.dtype(), dtype);
  dim = wrap_dim(dim, x_in.dim(), "cumsum");
  Tensor x = x_in.to(out_dtype);
  if (x.dim() == 0) return clone(x);
  Tensor rows = contiguous(transpose(x, dim, -1));
  Tensor result = empty(rows.sizes(), out_dtype);
  int64_t inner = rows.dim() == 0 ? 1 : rows.size(-1);
  int64_t outer = inner == 0 ? 0 : rows.numel() / inner;
  visit_numeric_dtype(out_dtype, "cumsum", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const T* in = static_cast<const T*>(rows.data_ptr());
    T* o = static_cast<T*>(result.data_ptr());
    parallel_for(0, outer, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        Acc acc = 0;
        for (int64_t i = 0; i < inner; ++i) {
          acc += static_cast<Acc>(in[r * inner + i]);
          o[r * inner + i] = static_cast<T>(acc);
        }
      }
    });
  });
  return contiguous(transpose(result, dim, -1));
}

OpKernel<ops::sum> reg_sum(DispatchKey::CPU, &sum_cpu);
OpKernel<ops::mean> reg_mean(DispatchKey::CPU, &mean_cpu);
OpKernel<ops::prod> reg_prod(DispatchKey::CPU, &prod_cpu);
OpKernel<ops::amax> reg_amax(DispatchKey::CPU, &amax_cpu<true>);
OpKernel<ops::amin> reg_amin(DispatchKey::CPU, &amax_cpu<false>);
OpKernel<ops::max_dim> reg_max_dim(DispatchKey::CPU, &max_dim_cpu<true>);
OpKernel<ops::min_dim> reg_min_dim(DispatchKey::CPU, &max_dim_cpu<false>);
OpKernel<ops::argmax> reg_argmax(DispatchKey::CPU, &argmax_cpu<true>);
OpKernel<ops::argmin> reg_argmin(DispatchKey::CPU, &argmax_cpu<false>);
OpKernel<ops::var> reg_var(DispatchKey::CPU, &var_cpu);
OpKernel<ops::norm> reg_norm(DispatchKey::CPU, &norm_cpu);
OpKernel<ops::logsumexp> reg_logsumexp(DispatchKey::CPU, &logsumexp_cpu);
OpKernel<ops::all> reg_all(DispatchKey::CPU, &all_cpu<true>);
OpKernel<ops::any> reg_any(DispatchKey::CPU, &all_cpu<false>);
OpKernel<ops::cumsum> reg_cumsum(DispatchKey::CPU, &cumsum_cpu);

}  // namespace
}  // namespace trainrun
