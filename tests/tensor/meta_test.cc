// The meta device: tensors with a shape and dtype and no memory, their ops
// (the same shapes, dtypes and refusals as the CPU's, no data), the default
// device, and random_piece_ (a piece of a draw equals that part of the whole).
#include <thread>

#include "tensor/allocator.h"
#include "tensor/generator.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

const Device kMeta(DeviceType::Meta);

Tensor on_meta(const Tensor& t) { return to(t, kMeta); }

// f on CPU tensors and on meta tensors of the same shapes: the meta result has the CPU result's shape and dtype.
template <typename F>
void expect_same_geometry(const std::vector<Tensor>& inputs, F f, const char* what) {
  std::vector<Tensor> metas;
  for (const Tensor& t : inputs) metas.push_back(on_meta(t));
  const Tensor cpu = f(inputs), meta = f(metas);
  EXPECT_TRUE(meta.device().is_meta()) << what;
  EXPECT_EQ(meta.sizes(), cpu.sizes()) << what;
  EXPECT_EQ(meta.dtype(), cpu.dtype()) << what;
}

TEST(Meta, TensorsHoldNoMemory) {
  const size_t before = cpu_memory_stats().allocated_bytes;
  Tensor t = empty({1 << 20, 64}, TensorOptions(DType::Float32, kMeta));  // 256 MiB if it were real
  Tensor z = zeros({4096, 4096}, TensorOptions(DType::Float32, kMeta));
  Tensor r = randn({4096, 4096}, TensorOptions(DType::Float32, kMeta));
  EXPECT_EQ(cpu_memory_stats().allocated_bytes, before);
  EXPECT_TRUE(t.device().is_meta());
  EXPECT_EQ(t.sizes(), (IntList{1 << 20, 64}));
  EXPECT_EQ(Device("meta"), kMeta);
  EXPECT_EQ(kMeta.str(), "meta");
  expect_error<Error>([&] { t.data_ptr(); }, {"meta tensor has no data"});
  expect_error<Error>([&] { to(z, Device()); }, {"cannot copy out of a meta tensor"});
  EXPECT_EQ(t.str(), "tensor(..., device='meta', size=(1048576, 64))");
  EXPECT_EQ(empty({3}, TensorOptions(DType::Float64, kMeta)).str(),
            "tensor(..., device='meta', size=(3,), dtype=torch.float64)");
}

TEST(Meta, ElementwiseOpsBroadcastAndPromoteAsOnTheCpu) {
  Tensor f = randn({4, 1, 3}), g = randn({5, 1}), i = arange(15).reshape({5, 3}), b = gt(randn({5, 3}), 0.0);
  expect_same_geometry(
      {f, g}, [](auto v) { return add(v[0], v[1]); }, "add");
  expect_same_geometry(
      {i, g}, [](auto v) { return mul(v[0], v[1]); }, "int * float");
  expect_same_geometry(
      {i, i}, [](auto v) { return div(v[0], v[1]); }, "int / int -> float");
  expect_same_geometry(
      {i, add(i, 1.0)}, [](auto v) { return div(v[0], v[1], "floor"); }, "div floor");
  expect_same_geometry(
      {f, g}, [](auto v) { return lt(v[0], v[1]); }, "comparison -> bool");
  expect_same_geometry(
      {i}, [](auto v) { return exp(v[0]); }, "exp of ints -> float");
  expect_same_geometry(
      {b, f, g}, [](auto v) { return where(v[0], v[1], v[2]); }, "where");
  expect_same_geometry(
      {i}, [](auto v) { return clamp(v[0], Scalar(0.5), std::nullopt); }, "clamp float bound");
  expect_same_geometry(
      {f}, [](auto v) { return gelu(v[0], "tanh"); }, "gelu");
  expect_error<ValueError>([&] { add(on_meta(f), on_meta(randn({4, 2, 2}))); }, {"broadcast"});
  expect_error<TypeError>([&] { sub(on_meta(b), on_meta(b)); }, {"bool"});
  Tensor m = on_meta(f);
  const uint64_t v = m.impl()->version();
  mul_(m, 2.0);  // in place: shape kept, the write counted
  EXPECT_EQ(m.sizes(), f.sizes());
  EXPECT_GT(m.impl()->version(), v);
}

TEST(Meta, ShapedOpsGiveTheCpuShapes) {
  Tensor x = randn({2, 3, 8}), w = randn({8, 5}), idx = tensor<int64_t>({2, 0, 1});
  expect_same_geometry(
      {x, w}, [](auto v) { return matmul(v[0], v[1]); }, "matmul");
  expect_same_geometry(
      {x}, [](auto v) { return sum(v[0], {1}, true); }, "sum keepdim");
  expect_same_geometry(
      {x},
      [](auto v) {
        return mean(v[0], {0, 2});
      },
      "mean");
  expect_same_geometry(
      {x}, [](auto v) { return argmax(v[0], std::nullopt, true); }, "argmax keepdim");
  expect_same_geometry(
      {x}, [](auto v) { return std::get<1>(max(v[0], 2, false)); }, "max.dim indices");
  expect_same_geometry(
      {x}, [](auto v) { return softmax(v[0], -1); }, "softmax");
  expect_same_geometry(
      {x}, [](auto v) { return std::get<2>(layer_norm(v[0], {8}, Tensor(), Tensor(), 1e-5)); }, "layer_norm rstd");
  expect_same_geometry(
      {x, idx}, [](auto v) { return index_select(v[0], 1, v[1]); }, "index_select");
  expect_same_geometry(
      {x}, [](auto v) { return std::get<0>(topk(v[0], 3, 2)); }, "topk");
  expect_same_geometry(
      {x, x},
      [](auto v) {
        return cat({v[0], v[1]}, 1);
      },
      "cat");
  expect_same_geometry(
      {x}, [](auto v) { return cumsum(v[0], 1); }, "cumsum");
  expect_same_geometry(
      {randn({1, 3, 9, 9}), randn({4, 3, 3, 3})},
      [](auto v) {
        return conv2d(v[0], v[1], Tensor(), {2, 2}, {1, 1});
      },
      "conv2d");
  expect_same_geometry(
      {randn({2, 3, 9, 9})},
      [](auto v) {
        return std::get<0>(max_pool2d(v[0], {3, 3}, {2, 2}));
      },
      "max_pool2d");
  expect_same_geometry(
      {randn({6, 10}), tensor<int64_t>({1, 9, 0, 3, 3, 2})}, [](auto v) { return cross_entropy(v[0], v[1]); },
      "cross_entropy");
  expect_error<IndexError>([&] { sum(on_meta(x), {3}); }, {"sum"});
  expect_error<NotImplementedError>([&] { nonzero(on_meta(x)); }, {"nonzero", "depends on the data"});
}

TEST(Meta, TheDefaultDeviceIsPerThreadAndOnlyForWhoAsks) {
  EXPECT_TRUE(default_device().is_cpu());
  {
    DefaultDeviceGuard guard(kMeta);
    EXPECT_TRUE(default_device().is_meta());
    EXPECT_TRUE(empty({2}).device().is_cpu());  // C++ factories (and kernels' scratch) take the CPU unless told
    std::thread([] { EXPECT_TRUE(default_device().is_cpu()); }).join();
  }
  EXPECT_TRUE(default_device().is_cpu());
}

// random_piece_ of every box of a whole equals that box of uniform_/normal_ on the whole, in float32 (four
// values per Philox block) and float64 (two), and moves the generator as the whole's draw does.
TEST(Meta, ARandomPieceEqualsThatPartOfTheWholeDraw) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (bool normal : {false, true}) {
      const IntList shape = {7, 5, 3};
      manual_seed(11);
      Tensor whole = empty(shape, dt);
      normal ? normal_(whole, 0.5, 2.0) : uniform_(whole, -1.0, 3.0);
      const uint64_t after_whole = default_generator().offset();
      for (const auto& [offsets, sizes] : std::vector<std::pair<IntList, IntList>>{{{0, 0, 0}, {7, 5, 3}},
                                                                                   {{3, 0, 0}, {4, 5, 3}},
                                                                                   {{1, 2, 1}, {5, 2, 2}},
                                                                                   {{6, 4, 2}, {1, 1, 1}},
                                                                                   {{0, 3, 0}, {7, 2, 3}},
                                                                                   {{2, 0, 0}, {0, 5, 3}}}) {
        manual_seed(11);
        Tensor piece = empty(sizes, dt);
        random_piece_(piece, normal, normal ? 0.5 : -1.0, normal ? 2.0 : 3.0, shape, offsets);
        EXPECT_EQ(default_generator().offset(), after_whole);
        Tensor expected = whole;
        for (int d = 0; d < 3; ++d) expected = expected.narrow(d, offsets[d], sizes[d]);
        EXPECT_EQ(values(piece), values(expected))
            << dtype_name(dt) << (normal ? " normal" : " uniform") << " at " << fmt::format("{}", offsets);
      }
    }
  }
  Tensor t = empty({2, 2});
  expect_error<ValueError>([&] { random_piece_(t, false, 0, 1, {3, 3}, {2, 0}); }, {"does not fit"});
  Tensor m = empty({2, 2}, TensorOptions(DType::Float32, kMeta));
  random_piece_(m, true, 0, 1, {4, 2}, {2, 0});  // nothing to fill, the generator moves on
}

}  // namespace
}  // namespace trainrun
