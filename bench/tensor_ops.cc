// Times the tensor-core rows of bench/tensor_ops.py and prints one line per
// row: "<row>\t<median seconds>". The Python driver runs the same rows on
// PyTorch and prints the side-by-side table.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tensor/ops.h"

using namespace trainrun;

double median_seconds(const std::function<void()>& f, int reps) {
  f();  // warm-up: page faults, thread start-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  int reps = argc > 2 ? std::atoi(argv[2]) : 15;
  set_num_threads(threads);
  manual_seed(0);
  const int64_t n16m = 1 << 24;


  Tensor x = randn({n16m}), y = randn({n16m}), out = empty({n16m});
  std::printf("add\t%.9f\n", median_seconds([&] { add_out(out, x, y); }, reps));
  std::printf("mul\t%.9f\n", median_seconds([&] { mul_out(out, x, y); }, reps));
  Tensor m = x.view({4096, 4096}), row = randn({4096}), mout = out.view({4096, 4096});
  std::printf("broadcast_add\t%.9f\n", median_seconds([&] { add_out(mout, m, row); }, reps));
  std::printf("sum\t%.9f\n", median_seconds([&] { sum(x); }, reps));
  std::printf("softmax\t%.9f\n", median_seconds([&] { softmax(m, -1); }, reps));

  Tensor ln_x = randn({4096, 1024}), w = randn({1024}), bias = randn({1024});
  std::printf("layer_norm\t%.9f\n", median_seconds([&] { layer_norm(ln_x, {1024}, w, bias, 1e-5); }, reps));

  Tensor img = randn({8, 64, 56, 56}), k = randn({64, 64, 3, 3});
  std::printf("conv2d\t%.9f\n", median_seconds([&] { conv2d(img, k, Tensor(), {1, 1}, {1, 1}); }, std::max(3, reps / 3)));
  Tensor planes = randn({32, 32, 64, 64});
  std::printf("max_pool2d\t%.9f\n",
              median_seconds([&] { max_pool2d(planes, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false); }, reps));
  std::printf("transpose\t%.9f\n", median_seconds([&] { m.t().contiguous(); }, reps));
  Tensor cube = x.view({128, 512, 256});
  std::printf("sum_middle\t%.9f\n", median_seconds([&] { sum(cube, {1}); }, reps));
  Tensor images = randn({32, 3, 224, 224}), backwards = arange(223, -1, -1);
  std::printf("reverse_last\t%.9f\n", median_seconds([&] { index_select(images, 3, backwards); }, reps));
  std::printf("to_half\t%.9f\n", median_seconds([&] { x.to(DType::Float16); }, reps));
  Tensor mask = gt(randn({4096, 1024}), 1.0);
  std::printf("nonzero\t%.9f\n", median_seconds([&] { nonzero(mask); }, reps));
  // Last: OpenBLAS threads spin after a call and would slow the rows after it.
  Tensor a = randn({1024, 1024}), b = randn({1024, 1024}), c = empty({1024, 1024});
  std::printf("matmul\t%.9f\n", median_seconds([&] { mm_out(c, a, b); }, reps));
  return 0;
}
