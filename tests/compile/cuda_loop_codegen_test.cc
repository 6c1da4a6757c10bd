// compile/cuda_loop_codegen.h: the CUDA kernels of fused loops. With no GPU
// here, each loop's kernels run under tests/compile/cuda_emulation.h (one
// std::thread per CUDA thread, real barriers and warp exchanges) in place
// of the CPU loop, on the graph's own inputs, and must give what eager
// gives; the same source must compile with NVRTC for sm_80 and sm_90.
// Every op the CPU loops fuse has CUDA code. (On a GPU, gpu_check.sh's
// tests/python/test_compile_cuda.py runs them for real.)
#include "compile/cuda_loop_codegen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/grad_mode.h"
#include "compile/cuda/nvrtc.h"
#include "compile/device_loop.h"
#include "compile/fused_kernel.h"
#include "compile/fusion.h"
#include "compile/graph_capture.h"
#include "compile/kernel_library.h"
#include "tensor/elementwise.h"
#include "tensor/factories.h"
#include "tensor/nn_functional.h"
#include "tensor/reductions.h"
#include "tests/compile/cuda_emulation.h"
#include "tests/compile/record_graph.h"
#include "tests/compile/temp_kernel_cache.h"
#include "tests/tensor/test_util.h"

namespace trainrun::compile {
namespace {

using Program = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// `call_<kernel>(void** args)`: the kernel called with its parameters from an array (pointers as they are,
// integers through pointers), for tr_emulate_launch.
std::string trampolines(const std::string& name, const LoopPlan& plan, const CudaLoopShape& shape) {
  std::string params;
  size_t k = 0;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    params += fmt::format(shape.host_scalar[i] ? "*(float*)a[{}], " : "(const float*)a[{}], ", k++);
  for (size_t i = 0; i < plan.outputs.size(); ++i) params += fmt::format("(float*)a[{}], ", k++);
  std::string out = fmt::format(
      "extern \"C\" void call_{0}(void** a) {{ {0}({1}(float*)a[{2}], *(long long*)a[{3}], *(long long*)a[{4}]); }}\n",
      name, params, k, k + 1, k + 2);
  if (shape.column_sums > 0) {
    std::string sums;
    for (size_t j = 0; j < shape.column_sums; ++j) sums += fmt::format("(float*)a[{}], ", j + 1);
    const size_t n = shape.column_sums + 1;
    out += fmt::format("extern \"C\" void call_{0}_columns(void** a) {{ {0}_columns((const float*)a[0], {1}"
                       "*(long long*)a[{2}], *(long long*)a[{3}], *(int*)a[{4}]); }}\n",
                       name, sums, n, n + 1, n + 2);
  }
  return out;
}

using Launch = void (*)(void (*)(void**), void**, unsigned, unsigned);
using Kernel = void (*)(void**);

// A loop's CUDA kernels, emulated on the CPU: launched as compile/cuda/cuda_loops.cc launches them, with a
// smaller geometry (at most 3 blocks of 64 threads) so that blocks stride over rows and threads over columns.
class EmulatedCudaLoop : public DeviceLoop {
 public:
  EmulatedCudaLoop(std::shared_ptr<KernelLibrary> lib, const std::string& name, CudaLoopShape shape)
      : lib_(std::move(lib)), shape_(std::move(shape)) {
    launch_ = reinterpret_cast<Launch>(lib_->symbol("tr_emulate_launch"));
    kernel_ = reinterpret_cast<Kernel>(lib_->symbol("call_" + name));
    if (shape_.column_sums > 0) columns_ = reinterpret_cast<Kernel>(lib_->symbol("call_" + name + "_columns"));
  }

  void run(const FusedKernel& k, const std::vector<Tensor>& in, std::vector<Tensor>& out) const override {
    std::vector<Tensor> inputs;
    std::vector<void*> args;
    std::vector<float> values(in.size());  // (numbers passed by value: the kernel's parameter is the float)
    for (size_t i = 0; i < in.size(); ++i) {
      if (shape_.host_scalar[i]) {
        values[i] = FusedKernel::scalar_value(in[i]);
        args.push_back(&values[i]);
        continue;
      }
      inputs.push_back(k.inputs[i] == FusedKernel::InputKind::Scalar ? in[i].to(DType::Float32) : in[i]);
      args.push_back(inputs.back().data_ptr());
    }
    out.clear();
    for (const IntList& sizes : k.output_sizes) {
      // NaN-filled: a kernel that leaves an element unwritten fails the comparison.
      out.push_back(full(sizes, std::nan(""), TensorOptions(DType::Float32)));
      args.push_back(out.back().data_ptr());
    }
    long long rows = k.rows, cols = k.cols;
    const int blocks = static_cast<int>(std::max<long long>(1, std::min<long long>(rows, 3)));
    Tensor work = full({static_cast<int64_t>(std::max<size_t>(1, shape_.work_floats(blocks, cols)))}, std::nan(""),
                       TensorOptions(DType::Float32));
    args.push_back(work.data_ptr());
    args.push_back(&rows);
    args.push_back(&cols);
    launch_(kernel_, args.data(), shape_.by_row ? static_cast<unsigned>(blocks) : 2, 64);
    ++launches;
    if (shape_.column_sums == 0) return;
    std::vector<void*> column_args = {work.data_ptr()};
    for (size_t o : shape_.column_sum_outputs) column_args.push_back(out.at(o).data_ptr());
    int num_blocks = blocks;
    column_args.insert(column_args.end(), {&rows, &cols, &num_blocks});
    launch_(columns_, column_args.data(), 1, 32);
  }

  mutable int launches = 0;

 private:
  std::shared_ptr<KernelLibrary> lib_;
  CudaLoopShape shape_;
  Launch launch_ = nullptr;
  Kernel kernel_ = nullptr, columns_ = nullptr;
};

class CudaLoopCodegen : public TempKernelCache {
 protected:
  // Fuses program's graph as for the CPU, then swaps each loop for its emulated CUDA kernels; checks the
  // fused graph gives what eager does on `inputs`, and that NVRTC compiles the source. numbers_by_value: the
  // loops' numbers are taken as a CUDA loop takes numbers on the CPU (kernel parameters by value). Returns the
  // loops.
  std::vector<std::shared_ptr<EmulatedCudaLoop>> check(const std::vector<Tensor>& inputs, const Program& program,
                                                       double rtol = 1e-5, double atol = 1e-6,
                                                       bool numbers_by_value = false) {
    auto graph = record(inputs, program);
    std::vector<LoopPlan> plans = plan_loops(*graph, {});
    for (LoopPlan& plan : plans)
      for (size_t i = 0; i < plan.inputs.size(); ++i)
        plan.host_scalar[i] = numbers_by_value && plan.input_kinds[i] == FusedKernel::InputKind::Scalar;
    FusionResult fused = fuse_pointwise(graph, {});
    EXPECT_EQ(plans.size(), static_cast<size_t>(fused.loops));
    std::string source = cuda_loops_prelude();
    std::string calls;
    for (size_t r = 0; r < plans.size(); ++r) {
      source += cuda_loop_source(fmt::format("fused_{}", r), plans[r]);
      calls += trampolines(fmt::format("fused_{}", r), plans[r], cuda_loop_shape(plans[r]));
    }
    if (numbers_by_value) EXPECT_NE(source.find("float in1_value"), std::string::npos) << source;
    std::string reason;
    if (cuda::nvrtc_available(&reason)) {
      for (const char* arch : {"sm_80", "sm_90"}) {
        const std::string cubin = cuda::nvrtc_compile(source, arch, "test loops");
        EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF") << arch;
      }
    } else {
      ADD_FAILURE() << "NVRTC is part of the CUDA toolkit this project builds with: " << reason;
    }
    auto lib = KernelLibrary::load(cuda_emulation_prelude() + source + calls);
    std::vector<std::shared_ptr<EmulatedCudaLoop>> loops;
    for (const CapturedGraph::Node& node : fused.graph->nodes()) {
      if (node.fused == nullptr) continue;
      const size_t r = std::stoul(node.fused->name.substr(std::string("fused_").size()));
      loops.push_back(std::make_shared<EmulatedCudaLoop>(lib, node.fused->name, cuda_loop_shape(plans.at(r))));
      const_cast<FusedKernel&>(*node.fused).device_loop = loops.back();  // (the test owns this graph)
    }
    NoGradGuard no_grad;
    const std::vector<Tensor> got = fused.graph->run(inputs);
    const std::vector<Tensor> expected = program(inputs);
    EXPECT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < std::min(got.size(), expected.size()); ++i)
      EXPECT_TRUE(allclose(got[i], expected[i], rtol, atol, /*equal_nan=*/true))
          << "output " << i << "\n" << got[i] << "\n" << expected[i] << "\n" << source;
    for (const auto& loop : loops) EXPECT_EQ(loop->launches, 1);
    return loops;
  }
};

TEST_F(CudaLoopCodegen, APointwiseChainIsOneFlatKernel) {
  // tanh(x * bias + 1) * gelu(x) - exp(-x) / 3 over [5, 37], the bias by column; the numbers 1 and 3 read from
  // memory, then passed by value.
  Program chain = [](const std::vector<Tensor>& in) {
    const Tensor &x = in[0], &bias = in[1];
    return std::vector<Tensor>{sub(mul(tanh(add(mul(x, bias), 1)), gelu(x)), div(exp(neg(x)), 3))};
  };
  for (bool by_value : {false, true}) {
    auto loops = check({randn({5, 37}), randn({37})}, chain, 1e-5, 1e-6, by_value);
    EXPECT_EQ(loops.size(), 1u);
  }
}

TEST_F(CudaLoopCodegen, EveryOpTheCpuLoopsFuseHasCudaCode) {
  Program program = [](const std::vector<Tensor>& in) {
    const Tensor &x = in[0], &y = in[1];
    const Tensor p = add(abs(x), 0.5);  // positive, for log and sqrt
    Tensor a = add(mul(exp(neg(x)), log(p)), log1p(p), 2);
    Tensor b = sub(div(sqrt(p), rsqrt(p)), mul(erf(x), sigmoid(y)), 0.5);
    Tensor c = add(silu(x), mul(gelu(y), gelu(x, "tanh")));
    c = add(c, gelu_backward(y, x));
    Tensor d = add(relu(sin(x)), pow(cos(y), 2));
    Tensor e = where(gt(x, y), a, b);
    e = add(e, where(lt(x, 0), c, d));
    e = add(e, where(ge(y, 0.25), d, a));
    e = add(e, where(le(x, 0.5), b, c));
    e = add(e, where(eq(x, x), a, d));
    e = add(e, where(ne(y, 0), c, b));
    e = addcmul(e, tanh(x), y, 0.25);
    return std::vector<Tensor>{lerp(e, x, y)};
  };
  Tensor x = randn({4, 45}), y = randn({4, 45});
  check({x, y}, program, 1e-4, 1e-5);
  // The recorded loop used every op there is code for, so an op added to the CPU loops alone fails here.
  auto graph = record({x, y}, program);
  std::set<std::string> used;
  for (const LoopPlan& plan : plan_loops(*graph, {}))
    for (const LoopPlan::Step& step : plan.steps) used.insert(step.node->op->name());
  for (const std::string& op : fusable_op_names()) EXPECT_TRUE(used.count(op)) << op << " is not tested";
}

TEST_F(CudaLoopCodegen, SoftmaxsBackwardReducesEachRowInABlock) {
  // dx = y * (g - sum(g * y, -1)) over rows of 100 (more than the 64 threads) and 37 (fewer).
  for (int64_t cols : {100, 37}) {
    Tensor y = softmax(randn({7, cols}), 1), g = randn({7, cols});
    auto loops = check({y, g}, [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{mul(in[0], sub(in[1], sum(mul(in[1], in[0]), {-1}, true)))};
    });
    EXPECT_EQ(loops.size(), 1u);
  }
}

TEST_F(CudaLoopCodegen, LayerNormsBackwardSumsColumnsOverBlocksInOrder) {
  Tensor x = randn({30, 70}), g = randn({30, 70}), w = randn({70});
  Tensor mu = mean(x, {1}, true);
  Tensor rstd = rsqrt(add(mean(mul(sub(x, mu), sub(x, mu)), {1}, true), 1e-5));
  check({x, g, w, mu, rstd}, [](const std::vector<Tensor>& in) {
    const Tensor &xs = in[0], &gr = in[1], &wt = in[2], &m = in[3], &rs = in[4];
    Tensor x_hat = mul(sub(xs, m), rs);
    Tensor dx_hat = mul(gr, wt);
    Tensor inner = mean(mul(dx_hat, x_hat), {1}, true);
    Tensor dx = mul(rs, sub(sub(dx_hat, mean(dx_hat, {1}, true)), mul(x_hat, inner)));
    return std::vector<Tensor>{dx, sum(mul(gr, x_hat), {0}), sum(gr, {0}), mean(gr, {0})};
  }, 1e-4, 1e-4);
}

TEST_F(CudaLoopCodegen, AmaxLetsNaNWinAndMasksCrossPhasesThroughScratch) {
  Tensor x = randn({5, 83});
  x.data<float>()[2 * 83 + 80] = std::nanf("");
  auto loops = check({x}, [](const std::vector<Tensor>& in) {
    Tensor positive = gt(in[0], 0);  // a mask made in the first pass, read in the last
    Tensor shifted = exp(sub(in[0], amax(in[0], {-1}, true)));
    Tensor probs = div(shifted, sum(shifted, {-1}, true));
    return std::vector<Tensor>{where(positive, probs, 0), mul(positive.to(DType::Float32), 2)};
  });
  EXPECT_EQ(loops.size(), 1u);
}

TEST_F(CudaLoopCodegen, ShapesSayHowToLaunch) {
  Tensor x = randn({6, 9});
  auto graph = record({x}, [](const std::vector<Tensor>& in) {
    Tensor e = exp(in[0]);
    return std::vector<Tensor>{mul(e, 2), sum(mul(e, 3), {0}), mean(add(e, 1), {0})};
  });
  const std::vector<LoopPlan> plans = plan_loops(*graph, {});
  ASSERT_EQ(plans.size(), 1u);
  const CudaLoopShape shape = cuda_loop_shape(plans[0]);
  EXPECT_TRUE(shape.by_row);
  EXPECT_EQ(shape.scratch, 0u);
  ASSERT_EQ(shape.column_sums, 2u);
  EXPECT_EQ(shape.work_floats(3, 9), 2u * 3 * 9);
  // The outputs are in value order: mul, then the two column sums.
  EXPECT_EQ(shape.column_sum_outputs, (std::vector<size_t>{1, 2}));
  // A loop's source does not depend on sizes: rows and cols are read at run time.
  auto other = record({randn({11, 4})}, [](const std::vector<Tensor>& in) {
    Tensor e = exp(in[0]);
    return std::vector<Tensor>{mul(e, 2), sum(mul(e, 3), {0}), mean(add(e, 1), {0})};
  });
  EXPECT_EQ(cuda_loop_source("k", plans[0]), cuda_loop_source("k", plan_loops(*other, {}).at(0)));
  const std::string flat = cuda_loop_source("k", plan_loops(*record({x}, [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(exp(in[0]), 2)};
  }), {}).at(0));
  EXPECT_EQ(flat.find("__syncthreads"), std::string::npos);
  EXPECT_EQ(flat.find("_columns"), std::string::npos);
}

TEST_F(CudaLoopCodegen, FewLongRowsToReduceAreLeftToTheEagerKernels) {
  std::vector<std::shared_ptr<CapturedGraph>> graphs;  // (a plan's steps point into its graph's nodes)
  auto only_plan = [&graphs](const Tensor& x, const Program& program) {
    graphs.push_back(record({x}, program));
    std::vector<LoopPlan> plans = plan_loops(*graphs.back(), {});
    EXPECT_EQ(plans.size(), 1u);
    return plans.at(0);
  };
  const Program mean_of_all = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mean(mul(in[0], 3))};  // one row of everything
  };
  const Program row_sums = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(exp(mul(in[0], 0.5)), {1}, true)};
  };
  const Program column_sums = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(mul(in[0], 2), {0})};
  };
  const Program pointwise = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(exp(in[0]), 2)}; };
  EXPECT_FALSE(cuda_loop_fits(only_plan(randn({2, 5000}), mean_of_all), 1, 10000));
  EXPECT_FALSE(cuda_loop_fits(only_plan(randn({4, 5000}), row_sums), 4, 5000));
  EXPECT_TRUE(cuda_loop_fits(only_plan(randn({200, 5000}), row_sums), 200, 5000));  // a block for each of many rows
  EXPECT_TRUE(cuda_loop_fits(only_plan(randn({4, 300}), row_sums), 4, 300));          // short rows
  EXPECT_TRUE(cuda_loop_fits(only_plan(randn({3, 9000}), column_sums), 3, 9000));     // no row reduction
  EXPECT_TRUE(cuda_loop_fits(only_plan(randn({1, 9000}), pointwise), 1, 9000));
}

TEST_F(CudaLoopCodegen, NvrtcNamesTheErrorOfASourceThatDoesNotCompile) {
  std::string reason;
  if (!cuda::nvrtc_available(&reason)) GTEST_FAIL() << reason;
  try {
    cuda::nvrtc_compile("extern \"C\" __global__ void k() { undefined_name(); }", "sm_80", "a broken kernel");
    FAIL() << "no error";
  } catch (const ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a broken kernel"), std::string::npos) << what;
    EXPECT_NE(what.find("undefined_name"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace trainrun::compile
