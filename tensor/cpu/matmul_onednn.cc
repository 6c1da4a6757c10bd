#include "tensor/cpu/matmul_onednn.h"

#include "tensor/cpu/onednn_common.h"

namespace trainrun {
namespace {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;

struct MatmulPlan {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
  dnnl::memory::desc a, b, bias, out;
};

// Row-major [rows, cols] read in place: rows `ld` apart, or the transpose of such a matrix.
dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, bool transposed, int64_t ld) {
  return dnnl::memory::desc(dims{rows, cols}, dt::f32, transposed ? dims{1, ld} : dims{ld, 1});
}

std::unique_ptr<MatmulPlan> make_plan(int64_t M, int64_t K, int64_t N, const MatrixOperand& a, const MatrixOperand& b,
                                      bool has_bias, Epilogue epilogue) {
  auto plan = std::make_unique<MatmulPlan>();
  plan->a = matrix_desc(M, K, a.transposed, a.ld);
  plan->b = matrix_desc(K, N, b.transposed, b.ld);
  plan->bias = has_bias ? dnnl::memory::desc(dims{1, N}, dt::f32, dims{N, 1}) : dnnl::memory::desc();
  plan->out = dnnl::memory::desc(dims{M, N}, dt::f32, dims{N, 1});
  dnnl::post_ops post;
  switch (epilogue) {
    case Epilogue::None: break;
    case Epilogue::Relu: post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); break;
    case Epilogue::Gelu: post.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f); break;
    case Epilogue::GeluTanh: post.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f); break;
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(post);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours per call: safe from any thread
  auto desc = has_bias ? dnnl::matmul::desc(plan->a, plan->b, plan->bias, plan->out)
                       : dnnl::matmul::desc(plan->a, plan->b, plan->out);
  plan->pd = dnnl::matmul::primitive_desc(desc, attr, onednn::cpu_engine());
  plan->matmul = dnnl::matmul(plan->pd);
  return plan;
}

}  // namespace

bool onednn_linear(int64_t M, int64_t K, int64_t N, MatrixOperand a, MatrixOperand b, const float* bias,
                   Epilogue epilogue, float* out) {
  static onednn::PlanCache<MatmulPlan, 9> cache;
  const bool has_bias = bias != nullptr;
  const onednn::Key<9> key{M, K, N, a.transposed, a.ld, b.transposed, b.ld, has_bias, static_cast<int64_t>(epilogue)};
  std::shared_ptr<MatmulPlan> plan;
  try {
    plan = cache.get(key, [&] { return make_plan(M, K, N, a, b, has_bias, epilogue); });
  } catch (const dnnl::error&) {
    return false;  // no implementation for this shape on this CPU
  }
  onednn::set_omp_threads();
  const dnnl::engine& engine = onednn::cpu_engine();
  dnnl::stream stream(engine);
  onednn::Scratch scratch(plan->pd.scratchpad_desc());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(plan->a, engine, const_cast<float*>(a.data))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(plan->b, engine, const_cast<float*>(b.data))},
      {DNNL_ARG_DST, dnnl::memory(plan->out, engine, out)},
      {DNNL_ARG_SCRATCHPAD, scratch.memory}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plan->bias, engine, const_cast<float*>(bias)));
  plan->matmul.execute(stream, args);
  stream.wait();
  return true;
}

}  // namespace trainrun
