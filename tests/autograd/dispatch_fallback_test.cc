// The dispatcher's rules for a key without a kernel: a boxed fallback for a
// whole functionality key (Tracing) sees every op, forward and backward, in
// the boxed convention and lets it go on below; fall through and error
// policies; composite ops decompose above every key (autograd and tracing
// see their parts); ops with no boxed form are refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "tensor/dispatcher.h"
#include "tensor/ops.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

// Puts a fallback on Tracing and switches Tracing on for this thread; both
// undone at the end of the scope.
class TracingScope {
 public:
  explicit TracingScope(KeyFallback fallback) { Dispatcher::get().set_fallback(DispatchKey::Tracing, std::move(fallback)); }
  ~TracingScope() { Dispatcher::get().set_fallback(DispatchKey::Tracing, KeyFallback{}); }

 private:
  IncludeDispatchKeyGuard on_{DispatchKey::Tracing};
};

// A boxed fallback that records "op(type, type, ...)" and lets the op run.
KeyFallback recorder(std::vector<std::string>& trace) {
  KeyFallback f;
  f.kind = KeyFallback::Boxed;
  f.kernel = [&trace](const OpTable& op, DispatchKey key, DispatchKeySet keys, Stack& stack) {
    std::string line = op.name() + "(";
    for (size_t i = 0; i < stack.size(); ++i) line += std::string(i ? ", " : "") + stack[i].type_name();
    trace.push_back(line + ")");
    op.redispatch_boxed(key, keys, stack);
  };
  return f;
}

bool traced(const std::vector<std::string>& trace, const std::string& prefix) {
  for (const auto& line : trace)
    if (line.rfind(prefix, 0) == 0) return true;
  return false;
}

TEST(DispatchFallback, TracingFallsThroughByDefault) {
  IncludeDispatchKeyGuard on(DispatchKey::Tracing);
  EXPECT_VALUES(add(ft({1, 2}), 1), 2, 3);
}

TEST(DispatchFallback, ABoxedFallbackSeesEveryOpWithItsArgumentsAndResults) {
  std::vector<std::string> trace;
  Tensor x = ft({1, 2, 3, 4}).view({2, 2});
  Tensor s, copied;
  std::tuple<Tensor, Tensor> best;
  {
    TracingScope tracing(recorder(trace));
    s = sum(x, {1}, false, DType::Float64);  // an IntList, a bool and an optional dtype
    best = max(x, 1);                        // a tuple result
    copied = zeros({2, 2});
    Tensor& same = copy_(copied, x);  // an in-place op returns its own argument
    EXPECT_EQ(&same, &copied);
  }
  EXPECT_VALUES(s, 3, 7);
  EXPECT_EQ(s.dtype(), DType::Float64);
  EXPECT_VALUES(std::get<0>(best), 2, 4);
  EXPECT_VALUES(std::get<1>(best), 1, 1);
  EXPECT_VALUES(copied.view({-1}), 1, 2, 3, 4);
  EXPECT_TRUE(traced(trace, "sum(Tensor, int[], bool, dtype)")) << fmt::format("{}", fmt::join(trace, "\n"));
  EXPECT_TRUE(traced(trace, "max.dim(Tensor, int, bool)"));
  EXPECT_TRUE(traced(trace, "copy_(Tensor, Tensor)"));
  // Switched off again: nothing more is recorded.
  const size_t n = trace.size();
  add(x, x);
  EXPECT_EQ(trace.size(), n);
}

TEST(DispatchFallback, TracingIsBelowAutogradAndSeesTheBackwardOps) {
  std::vector<std::string> trace;
  Tensor x = ft({1, 2, 3});
  set_requires_grad(x);
  {
    TracingScope tracing(recorder(trace));
    backward(sum(mul(x, x)));
  }
  EXPECT_VALUES(grad(x), 2, 4, 6);  // autograd still recorded the graph above Tracing
  EXPECT_TRUE(traced(trace, "mul(Tensor, Tensor, Tensor)"));
  int muls = 0;
  for (const auto& line : trace) muls += line.rfind("mul(", 0) == 0;
  EXPECT_GE(muls, 2) << "the backward of x * x multiplies too:\n" << fmt::format("{}", fmt::join(trace, "\n"));
}

TEST(DispatchFallback, AnErrorFallbackNamesTheOpAndTheKey) {
  Tensor x = ft({1}), y = ft({2});
  KeyFallback error;
  error.kind = KeyFallback::Error;
  TracingScope tracing(error);
  expect_error<NotImplementedError>([&] { mul(x, y); }, {"op 'mul'", "dispatch key Tracing"});
}

TEST(DispatchFallback, OnlyFunctionalityKeysTakeAFallback) {
  expect_error<ValueError>([] { Dispatcher::get().set_fallback(DispatchKey::CPU, KeyFallback{}); }, {"CPU", "fixed"});
  expect_error<ValueError>([] { Dispatcher::get().set_fallback(DispatchKey::Autograd, KeyFallback{}); },
                           {"Autograd"});
  KeyFallback boxed_without_kernel;
  boxed_without_kernel.kind = KeyFallback::Boxed;
  expect_error<ValueError>([&] { Dispatcher::get().set_fallback(DispatchKey::Tracing, boxed_without_kernel); },
                           {"needs a kernel"});
  static_assert(is_backend_key(DispatchKey::CPU) && is_backend_key(DispatchKey::CUDA));
  static_assert(!is_backend_key(DispatchKey::Tracing) && !is_backend_key(DispatchKey::Autograd));
}

// softplus(x) = log1p(exp(x)), written with other ops and no backward formula.
Tensor softplus_composite(const Tensor& x) { return log1p(exp(x)); }
CompositeRegistration<Tensor(const Tensor&)> reg_softplus("test::softplus", &softplus_composite);
Tensor test_softplus(const Tensor& x) {
  return TR_DISPATCH("test::softplus", Tensor(const Tensor&), keys_of(x), x);
}

TEST(DispatchFallback, CompositeOpsDecomposeAboveEveryKey) {
  Tensor x = ft({-1, 0, 2});
  set_requires_grad(x);
  std::vector<std::string> trace;
  {
    TracingScope tracing(recorder(trace));
    backward(sum(test_softplus(x)));
  }
  // The gradient comes from the parts: d/dx log1p(exp(x)) = sigmoid(x).
  EXPECT_TRUE(allclose(grad(x), sigmoid(detach(x)), 1e-6, 1e-6)) << grad(x).str();
  EXPECT_FALSE(traced(trace, "test::softplus")) << "tracing sees the parts, not the composite";
  EXPECT_TRUE(traced(trace, "exp(") && traced(trace, "log1p("));
}

// An op whose signature has no boxed form (a raw pointer).
Tensor tagged_cpu(const Tensor& x, const int* tag) { return add(x, *tag); }
KernelRegistration<Tensor(const Tensor&, const int*)> reg_tagged("test::tagged", DispatchKey::CPU, &tagged_cpu);

TEST(DispatchFallback, AnOpWithNoBoxedFormIsRefusedByName) {
  const int tag = 5;
  Tensor x = ft({1});
  auto call = [&] { return TR_DISPATCH("test::tagged", Tensor(const Tensor&, const int*), keys_of(x), x, &tag); };
  EXPECT_VALUES(call(), 6);  // fine without a boxed fallback
  std::vector<std::string> trace;
  TracingScope tracing(recorder(trace));
  expect_error<NotImplementedError>(call, {"op 'test::tagged'", "dispatch key Tracing", "no boxed form"});
}

}  // namespace
}  // namespace trainrun
