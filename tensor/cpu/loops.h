#pragma once
// Inner loops for elementwise kernels run by TensorIterator. Each takes a
// functor on opmath values (float for 16-bit floats) and has a contiguous
// fast path the compiler can vectorize, a scalar-operand path, and a
// strided fallback. Operand 0 is the output.
#include "tensor/tensor_iterator.h"

namespace trainrun {

template <typename Out, typename In, typename F>
void unary_kernel(TensorIterator& iter, F f) {
  iter.for_each([&](char** data, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
      Out* o = reinterpret_cast<Out*>(data[0]);
      const In* a = reinterpret_cast<const In*>(data[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<opmath_t<In>>(a[i])));
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(data[0] + i * s[0]) =
            static_cast<Out>(f(static_cast<opmath_t<In>>(*reinterpret_cast<const In*>(data[1] + i * s[1]))));
    }
  });
}

template <typename Out, typename In, typename F>
void binary_kernel(TensorIterator& iter, F f) {
  using Acc = opmath_t<In>;
  iter.for_each([&](char** data, const int64_t* s, int64_t n) {
    Out* o = reinterpret_cast<Out*>(data[0]);
    const In* a = reinterpret_cast<const In*>(data[1]);
    const In* b = reinterpret_cast<const In*>(data[2]);
    if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == sizeof(In)) {
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<Acc>(a[i]), static_cast<Acc>(b[i])));
    } else if (s[0] == sizeof(Out) && s[1] == sizeof(In) && s[2] == 0) {
      const Acc bv = static_cast<Acc>(*b);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(static_cast<Acc>(a[i]), bv));
    } else if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(In)) {
      const Acc av = static_cast<Acc>(*a);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Out>(f(av, static_cast<Acc>(b[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        Acc x = static_cast<Acc>(*reinterpret_cast<const In*>(data[1] + i * s[1]));
        Acc y = static_cast<Acc>(*reinterpret_cast<const In*>(data[2] + i * s[2]));
        *reinterpret_cast<Out*>(data[0] + i * s[0]) = static_cast<Out>(f(x, y));
      }
    }
  });
}

// Three inputs of one type In (after promotion); `cond`-style inputs of other
// types are handled by the caller through separate kernels.
template <typename Out, typename In, typename F>
void ternary_kernel(TensorIterator& iter, F f) {
  using Acc = opmath_t<In>;
  iter.for_each([&](char** data, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      Acc x = static_cast<Acc>(*reinterpret_cast<const In*>(data[1] + i * s[1]));
      Acc y = static_cast<Acc>(*reinterpret_cast<const In*>(data[2] + i * s[2]));
      Acc z = static_cast<Acc>(*reinterpret_cast<const In*>(data[3] + i * s[3]));
      *reinterpret_cast<Out*>(data[0] + i * s[0]) = static_cast<Out>(f(x, y, z));
    }
  });
}

}  // namespace trainrun
