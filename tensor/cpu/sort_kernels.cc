// CPU sort and topk along a dim (moved last and made contiguous). NaN sorts
// as the largest value, as in PyTorch; sort is always stable here.
#include <algorithm>
#include <numeric>
#include <tuple>

#include "tensor/dispatcher.h"
#include "tensor/factories.h"
#include "tensor/op_schemas.h"
#include "tensor/thread_pool.h"
#include "tensor/views.h"

namespace trainrun {
namespace {

template <typename Acc>
bool less_nan_largest(Acc a, Acc b) {
  if (b != b) return a == a;  // non-NaN < NaN
  return a < b;
}

// Sorts (k == n) or selects the top k of each row; results [rows, k].
std::tuple<Tensor, Tensor> sort_rows(const Tensor& x, int64_t dim, int64_t k, bool descending, bool sorted,
                                     const char* op) {
  Tensor rows = contiguous(transpose(x, dim, -1));
  const int64_t n = rows.dim() == 0 ? 1 : rows.size(-1);
  const int64_t nrows = n == 0 ? 0 : rows.numel() / n;
  IntList shape = rows.sizes();
  if (!shape.empty()) shape.back() = k;
  Tensor values = empty(shape, x.dtype()), indices = empty(shape, DType::Int64);
  visit_dtype(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const T* px = static_cast<const T*>(rows.data_ptr());
    T* pv = static_cast<T*>(values.data_ptr());
    int64_t* pi = indices.data<int64_t>();
    parallel_for(0, nrows, 1, [&](int64_t b, int64_t e) {
      std::vector<int64_t> order(n);
      for (int64_t r = b; r < e; ++r) {
        const T* row = px + r * n;
        std::iota(order.begin(), order.end(), 0);
        auto cmp = [&](int64_t i, int64_t j) {
          Acc a = static_cast<Acc>(row[i]), c = static_cast<Acc>(row[j]);
          return descending ? less_nan_largest(c, a) : less_nan_largest(a, c);
        };
        // A selection takes equal values (NaNs among them) in index order, as the stable sort places them: an
        // unsorted top k's last value is then the k-th of the sort (kthvalue and median read it there).
        auto cmp_ties_by_index = [&](int64_t i, int64_t j) { return cmp(i, j) || (!cmp(j, i) && i < j); };
        if (k == n) std::stable_sort(order.begin(), order.end(), cmp);
        else if (sorted) std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp_ties_by_index);
        else std::nth_element(order.begin(), order.begin() + std::max<int64_t>(k - 1, 0), order.end(),
                              cmp_ties_by_index);
        for (int64_t i = 0; i < k; ++i) {
          pv[r * k + i] = row[order[i]];
          pi[r * k + i] = order[i];
        }
      }
    });
  });
  return {contiguous(transpose(values, dim, -1)), contiguous(transpose(indices, dim, -1))};
}

std::tuple<Tensor, Tensor> sort_cpu(const Tensor& x, int64_t dim, bool descending, bool /*stable*/) {
  if (x.dim() == 0) return {clone(x), zeros({}, DType::Int64)};
  dim = wrap_dim(dim, x.dim(), "sort");
  return sort_rows(x, dim, x.size(dim), descending, true, "sort");
}

std::tuple<Tensor, Tensor> topk_cpu(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  if (x.dim() == 0) {
    TR_CHECK(k == 0 || k == 1, IndexError, "topk: k ({}) is out of range for a 0-dim tensor", k);
    return {clone(x), zeros({}, DType::Int64)};
  }
  dim = wrap_dim(dim, x.dim(), "topk");
  TR_CHECK(k >= 0 && k <= x.size(dim), IndexError, "topk: k ({}) is out of range for dim {} of size {} (shape {})", k,
           dim, x.size(dim), x.shape_str());
  return sort_rows(x, dim, k, largest, sorted, "topk");
}

OpKernel<ops::sort> reg_sort(DispatchKey::CPU, &sort_cpu);
OpKernel<ops::topk> reg_topk(DispatchKey::CPU, &topk_cpu);

}  // namespace
}  // namespace trainrun
