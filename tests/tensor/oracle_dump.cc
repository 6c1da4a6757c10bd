// Dumps "<case>.x", "<case>.y"... inputs and "<case>.out" results of
// trainrun ops into one safetensors file (argv[1]). The pytest oracle
// recomputes each case with PyTorch and compares per dtype.
#include <cstdio>
#include <map>
#include <string>

#include "tensor/ops.h"

using namespace trainrun;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: oracle_dump OUT.safetensors\n");
    return 2;
  }
  manual_seed(1234);
  std::map<std::string, Tensor> t;
  auto put = [&](const std::string& name, std::initializer_list<Tensor> inputs, const Tensor& out) {
    const char* names[] = {"x", "y", "z"};
    int i = 0;
    for (const Tensor& in : inputs) t[name + "." + names[i++]] = in;
    t[name + ".out"] = out;
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    std::string s = std::string("_") + dtype_name(dt);
    Tensor x = randn({17, 33}).to(dt), y = randn({33}).to(dt), pos = add(rand({17, 33}), 0.1).to(dt);
    Tensor xt = randn({33, 17}).to(dt).t();  // non-contiguous
    put("add" + s, {x, y}, add(x, y, 0.5));
    put("mul_nc" + s, {xt, x}, mul(xt, x));
    put("div" + s, {x, pos}, div(x, pos));
    put("exp" + s, {x}, exp(x));
    put("log" + s, {pos}, log(pos));
    put("tanh" + s, {x}, tanh(x));
    put("sigmoid" + s, {x}, sigmoid(x));
    put("gelu" + s, {x}, gelu(x));
    put("gelu_tanh" + s, {x}, gelu(x, "tanh"));
    put("silu" + s, {x}, silu(x));
    put("erf" + s, {x}, erf(x));
    put("softmax" + s, {x}, softmax(x, 1));
    put("log_softmax0" + s, {x}, log_softmax(x, 0));
    put("sum1" + s, {x}, sum(x, {1}));
    put("mean0" + s, {x}, mean(x, {0}));
    put("var1" + s, {x}, var(x, {1}));
    put("norm" + s, {x}, norm(x));
    put("logsumexp1" + s, {x}, logsumexp(x, {1}));
    Tensor yt = randn({17, 33}).to(dt).t();  // [33, 17], read by BLAS as a transpose
    put("mm" + s, {x, yt}, mm(x, yt));
    put("cumsum1" + s, {x}, cumsum(x, 1));
    Tensor w = randn({33}).to(dt), b = randn({33}).to(dt);
    put("layer_norm" + s, {x, w, b}, std::get<0>(layer_norm(x, {33}, w, b, 1e-5)));
    put("remainder" + s, {x, pos}, remainder(x, pos));
  }
  Tensor img = randn({2, 4, 11, 10}), k = randn({6, 2, 3, 3}), bias = randn({6});
  put("conv2d_g2_s2_p1", {img, k, bias}, conv2d(img, k, bias, {2, 2}, {1, 1}, {1, 1}, 2));
  put("max_pool2d", {img}, std::get<0>(max_pool2d(img, {3, 3}, {2, 2}, {1, 1})));
  put("avg_pool2d", {img}, avg_pool2d(img, {3, 3}, {2, 2}, {1, 1}, true, false));
  Tensor logits = randn({8, 5}), target = randint(0, 5, {8});
  put("cross_entropy", {logits, target}, cross_entropy(logits, target));
  Tensor class_weight = rand({5}), ignored = tensor<int64_t>({0, 3, -100, 4, 1, -100, 2, 2}, {8});
  put("cross_entropy_smooth", {logits, target}, cross_entropy(logits, target, Tensor(), "mean", -100, 0.1));
  put("cross_entropy_smooth_weighted", {logits, ignored, class_weight},
      cross_entropy(logits, ignored, class_weight, "mean", -100, 0.2));
  put("cross_entropy_smooth_sum", {logits, ignored}, cross_entropy(logits, ignored, Tensor(), "sum", -100, 0.3));
  Tensor ia = randint(-50, 50, {4, 6}), ib = randint(1, 9, {6});
  put("int_floor_div", {ia, ib}, div(ia, ib, "floor"));
  put("int_remainder", {ia, ib}, remainder(ia, ib));
  put("int_sum", {ia}, sum(ia, {0}));
  put("int_promote_half", {ia, img.to(DType::Float16).flatten().narrow(0, 0, 24).view({4, 6})},
      add(ia, img.to(DType::Float16).flatten().narrow(0, 0, 24).view({4, 6})));
  auto [sv, si] = sort(ia, 1);
  put("sort_values", {ia}, sv);
  auto [tv, ti] = topk(logits, 2, 1);
  put("topk_values", {logits}, tv);
  save_safetensors(t, argv[1]);
  std::printf("wrote %zu tensors to %s\n", t.size(), argv[1]);
  return 0;
}
