// CPU kernels of where, lerp, addcmul and addcdiv.
#include "tensor/cpu/loops.h"
#include "tensor/dispatcher.h"
#include "tensor/elementwise_configs.h"
#include "tensor/op_schemas.h"

namespace trainrun {
namespace {

Tensor where_cpu(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  const IteratorConfig config = where_config();
  TensorIterator iter(config, out, {cond, a, b});
  visit_dtype(iter.compute_dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    iter.for_each([](char** d, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        bool c = *reinterpret_cast<const bool*>(d[1] + i * s[1]);
        *reinterpret_cast<T*>(d[0] + i * s[0]) = *reinterpret_cast<const T*>(d[c ? 2 : 3] + i * s[c ? 2 : 3]);
      }
    });
  });
  return iter.output();
}

Tensor lerp_cpu(const Tensor& a, const Tensor& b, const Tensor& weight, const Tensor& out) {
  const IteratorConfig config = plain_config("lerp");
  TensorIterator iter(config, out, {a, b, weight});
  visit_float_dtype(iter.compute_dtype(), "lerp", [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    ternary_kernel<T, T>(iter, [](Acc x, Acc y, Acc w) { return lerp_math(x, y, w); });
  });
  return iter.output();
}

template <bool divide>
Tensor addc_cpu(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, const Tensor& out) {
  const IteratorConfig config = addc_config(divide);
  TensorIterator iter(config, out, {self, t1, t2});
  visit_numeric_dtype(iter.compute_dtype(), config.op, [&](auto tag) {
    using T = decltype(tag);
    using Acc = opmath_t<T>;
    const Acc v = static_cast<Acc>(std::is_floating_point<Acc>::value ? value.to_double() : value.to_int());
    ternary_kernel<T, T>(iter, [v](Acc s, Acc x, Acc y) {
      if constexpr (divide) return s + v * (x / y);
      else return s + v * (x * y);
    });
  });
  return iter.output();
}

OpKernel<ops::where> reg_where(DispatchKey::CPU, &where_cpu);
OpKernel<ops::lerp> reg_lerp(DispatchKey::CPU, &lerp_cpu);
OpKernel<ops::addcmul> reg_addcmul(DispatchKey::CPU, &addc_cpu<false>);
OpKernel<ops::addcdiv> reg_addcdiv(DispatchKey::CPU, &addc_cpu<true>);

}  // namespace
}  // namespace trainrun
