#pragma once
// Creating tensors: empty/zeros/ones/full/arange/linspace/eye, random
// factories, and wrapping existing memory.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "tensor/generator.h"
#include "tensor/tensor.h"

namespace trainrun {

struct TensorOptions {
  std::optional<DType> dtype;  // unset: default float dtype (or inferred, for arange/full)
  Device device;
  TensorOptions() = default;
  TensorOptions(DType t) : dtype(t) {}  // NOLINT: lets callers write zeros({2}, DType::Int64)
  TensorOptions(DType t, Device d) : dtype(t), device(d) {}
  DType dtype_or_default() const { return dtype.value_or(default_float_dtype()); }
};

Tensor empty(const IntList& sizes, TensorOptions opts = {});
Tensor empty_strided(const IntList& sizes, const IntList& strides, TensorOptions opts = {});
Tensor zeros(const IntList& sizes, TensorOptions opts = {});
Tensor ones(const IntList& sizes, TensorOptions opts = {});
// dtype unset: inferred from the value (bool, int64 or the default float).
Tensor full(const IntList& sizes, const Scalar& value, TensorOptions opts = {});
// Values start, start+step, ... < end. dtype unset: int64 if all are integers.
Tensor arange(const Scalar& end, TensorOptions opts = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, TensorOptions opts = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
Tensor eye(int64_t n, int64_t m = -1, TensorOptions opts = {});
// A 0-dim tensor holding v.
Tensor scalar_tensor(const Scalar& v, TensorOptions opts = {});
// A tensor of the given shape holding a copy of `values`.
template <typename T>
Tensor tensor(const std::vector<T>& values, IntList sizes = {});

Tensor empty_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& v, std::optional<DType> dtype = std::nullopt);

// Random factories draw from `gen` (default: the global generator). Results
// depend on the seed only, never on the number of threads; on the CPU they
// are PyTorch's for the same seed (tensor/cpu/pytorch_cpu_draws.h).
Tensor rand(const IntList& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const IntList& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const IntList& sizes, TensorOptions opts = DType::Int64,
               Generator* gen = nullptr);
Tensor rand_like(const Tensor& t, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, Generator* gen = nullptr);
Tensor& uniform_(Tensor& t, double from = 0, double to = 1, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
// Each element becomes 1 with probability p, else 0.
Tensor& bernoulli_(Tensor& t, double p, Generator* gen = nullptr);
// Each element an integer in [low, high) (Tensor.random_(low, high)).
Tensor& random_(Tensor& t, int64_t low, int64_t high, Generator* gen = nullptr);
// 0..n-1 in a random order (on the CPU: PyTorch's randperm for the same seed).
Tensor randperm(int64_t n, Generator* gen = nullptr);
// One rank's piece of uniform_(whole, a, b) (normal: normal_(whole, a, b)),
// where t is the box [offsets, offsets + t.sizes()) of a tensor `whole` of
// `global_sizes`: t gets exactly the values those elements of the whole
// would get, and gen moves on as it would for the whole. A sharded model
// initialised piece by piece thus equals the one a single process makes,
// whatever the number of ranks, and no rank holds more than the span of
// its piece.
Tensor& random_piece_(Tensor& t, bool normal, double a, double b, const IntList& global_sizes, const IntList& offsets,
                      Generator* gen = nullptr);

// Wraps memory owned elsewhere; `deleter` runs when the last view dies.
Tensor from_blob(void* data, const IntList& sizes, const IntList& strides, DType dtype,
                 std::function<void(void*)> deleter = nullptr, Device device = Device());
// Row-major strides for `sizes`.
IntList contiguous_strides(const IntList& sizes);

template <typename T>
Tensor tensor(const std::vector<T>& values, IntList sizes) {
  if (sizes.empty() && values.size() != 1) sizes = {static_cast<int64_t>(values.size())};
  Tensor t = empty(sizes, dtype_of<T>::value);
  TR_CHECK(t.numel() == static_cast<int64_t>(values.size()), ValueError,
           "tensor(): {} values do not fill shape {}", values.size(), t.shape_str());
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template <>
Tensor tensor<bool>(const std::vector<bool>& values, IntList sizes);

}  // namespace trainrun
