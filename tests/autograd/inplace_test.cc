// In-place ops on tensors in a graph: the written tensor takes the op's node
// as its history (as PyTorch rebases it), gradients match the out-of-place
// form, and the cases that would silently give wrong gradients are refused.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops.h"
#include "tests/autograd/gradcheck_util.h"
#include "tests/expect_error.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

// The gradients of f's inputs after backward(sum(f(inputs) * weights)).
TensorList grads_of(const std::function<Tensor(TensorList&)>& f, const TensorList& values) {
  TensorList inputs;
  for (const Tensor& v : values) {
    Tensor c = detach(v).clone();
    inputs.push_back(set_requires_grad(c));
  }
  Tensor out = f(inputs);
  backward(sum(mul(out, arange(out.numel()).to(out.dtype()).view(out.sizes()))));
  TensorList g;
  for (const Tensor& t : inputs) g.push_back(grad(t));
  return g;
}

void expect_same_grads(const TensorList& a, const TensorList& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(allclose(a[i], b[i], 1e-12, 1e-12)) << "input " << i;
}

TEST(InPlace, NonLeafOpsMatchTheOutOfPlaceForm) {
  manual_seed(21);
  TensorList v{randn({3, 4}, DType::Float64), randn({4}, DType::Float64), randn({3, 4}, DType::Float64)};
  // add_ / mul_ (whose formula needs the value from before the write) /
  // relu_ / chains of them, on an intermediate h.
  expect_same_grads(grads_of(
                        [](TensorList& in) {
                          Tensor h = mul(in[0], 2.0);
                          add_(h, in[1]);
                          mul_(h, in[2]);
                          relu_(h);
                          return h;
                        },
                        v),
                    grads_of([](TensorList& in) { return relu(mul(add(mul(in[0], 2.0), in[1]), in[2])); }, v));
  expect_same_grads(
      grads_of(
          [](TensorList& in) {
            Tensor h = exp(in[0]);
            Tensor k = mul(h, 1.0);  // exp saves its result; write into a fresh tensor
            sub_(k, in[1], 0.5);
            addcmul_(k, in[2], in[2], 0.25);
            clamp_(k, -1.0, 2.0);
            return k;
          },
          v),
      grads_of(
          [](TensorList& in) { return clamp(addcmul(sub(exp(in[0]), in[1], 0.5), in[2], in[2], 0.25), -1.0, 2.0); },
          v));
}

TEST(InPlace, HistoryAndVersionAreUpdated) {
  Tensor x = leaf({4});
  Tensor h = mul(x, 3.0);
  const uint64_t version = h.impl()->version();
  add_(h, 1.0);
  EXPECT_GT(h.impl()->version(), version);
  EXPECT_EQ(grad_fn(h)->name(), "AddBackward");
  // A buffer outside any graph joins it when a tensor that needs grad is added in.
  Tensor buffer = zeros({4}, DType::Float64);
  add_(buffer, h);
  ASSERT_TRUE(requires_grad(buffer));
  backward(sum(buffer));
  expect_close(grad(x), {3, 3, 3, 3});
}

TEST(InPlace, CopyAndFillRebaseTheHistory) {
  Tensor x = leaf({3}), y = leaf({3});
  Tensor h = mul(x, 2.0);
  copy_(h, mul(y, 5.0));  // h's values now come from y only
  backward(sum(h));
  expect_close(grad(y), {5, 5, 5});
  EXPECT_FALSE(grad(x).defined() && any(ne(grad(x), 0)).item<bool>());
  Tensor k = mul(x, 2.0);
  fill_(k, 7.0);
  Tensor z = add(k, mul(y, 1.0));
  backward(sum(z));
  EXPECT_FALSE(grad(x).defined() && any(ne(grad(x), 0)).item<bool>());
}

TEST(InPlace, CompositeInPlaceOps) {
  Tensor x = leaf({2, 3});
  Tensor src = leaf({2, 3});
  Tensor h = mul(x, 1.0);
  index_add_(h, 0, tensor<int64_t>({1, 1}, {2}), src);
  masked_fill_(h, tensor<bool>({true, false, false}, {3}), 0.0);
  backward(sum(h));
  expect_close(grad(x), {0, 1, 1, 0, 1, 1});
  expect_close(grad(src), {0, 1, 1, 0, 1, 1});
}

TEST(InPlace, RefusedWhenGradientsWouldGoWrong) {
  Tensor w = leaf({3});
  expect_error<Error>([&] { add_(w, 1.0); }, {"a leaf Variable that requires grad", "in-place", "no_grad"});
  expect_error<Error>([&] { copy_(w, ones({3}, DType::Float64)); }, {"leaf", "in-place"});
  {
    NoGradGuard no_grad;  // how optimizers update parameters
    add_(w, 1.0);
  }
  // A view of a leaf that requires grad cannot be written either (its base is the leaf).
  Tensor leaf_row = select(w, 0, 0);
  expect_error<Error>([&] { mul_(leaf_row, 2.0); }, {"a view of a leaf Variable that requires grad"});
  Tensor out = empty({3}, DType::Float64);
  expect_error<NotImplementedError>([&] { mul_out(out, w, w); }, {"MulBackward", "out="});
  // A saved tensor changed in place is still caught at backward.
  Tensor a = mul(w, 1.0);
  Tensor b = mul(a, a);  // MulBackward saves a
  Tensor c = add(a, 0.0);
  (void)c;
  Tensor d = sum(b);
  {
    NoGradGuard no_grad;
    add_(a, 1.0);
  }
  expect_error<Error>([&] { backward(d); }, {"modified in place"});
}

// A write through a view rebases its base's history (PyTorch's CopySlices), and a view of a base written since
// follows the base when next used: h = 2w, h[1] *= 2, h += 1, loss = sum(h) + h[1] gives dloss/dw = [2, 8, 2].
TEST(InPlace, WritesThroughViewsReachTheBase) {
  Tensor w = leaf({3});
  Tensor h = mul(w, 2.0);
  Tensor row = select(h, 0, 1);  // a view of h
  mul_(row, 2.0);
  add_(h, 1.0);  // h has a view: row follows it when next used
  backward(add(sum(h), sum(row)));
  Tensor g = grad(w);
  ASSERT_TRUE(g.defined());
  EXPECT_VALUES(g, 2.0, 8.0, 2.0);
}

// copy_ is a write whichever path copies the values (a contiguous same-dtype copy is one memcpy; it once left the
// version where it was, so a backward through a tensor overwritten that way silently used the new values).
TEST(Inplace, EveryCopyMovesTheVersionOn) {
  Tensor x = ones({4});
  const int64_t v0 = x.impl()->version();
  copy_(x, ones({4}));  // contiguous, same dtype
  EXPECT_EQ(x.impl()->version(), v0 + 1);
  copy_(x, ones({4}, DType::Float64));  // converting
  EXPECT_EQ(x.impl()->version(), v0 + 2);
  copy_(x, x);  // onto itself
  EXPECT_EQ(x.impl()->version(), v0 + 3);
  Tensor w = leaf({2});
  Tensor a = mul(w, 1.0);
  Tensor s = sum(sin(a));  // SinBackward saves a
  {
    NoGradGuard no_grad;
    copy_(a, full({2}, 2.0));
  }
  expect_error<Error>([&] { backward(s); }, {"SinBackward", "modified in place"});
}

}  // namespace
}  // namespace trainrun
