#include "tensor/cpu/matmul_onednn.h"

#include <cstring>

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

// Row-major [rows, cols] read in place: rows `ld` apart, or the transpose of such a matrix; with a batch, a
// leading dimension of matrices `batch_stride` apart.
dnnl::memory::desc matrix_desc(int64_t batch, int64_t rows, int64_t cols, const MatrixOperand& m) {
  const dims inner = m.transposed ? dims{1, m.ld} : dims{m.ld, 1};
  if (batch == 1) return dnnl::memory::desc(dims{rows, cols}, dt::f32, inner);
  return dnnl::memory::desc(dims{batch, rows, cols}, dt::f32, dims{m.batch_stride, inner[0], inner[1]});
}

struct PlanArgs {
  GemmShape shape;
  MatrixOperand a, b;
  bool has_bias;
  Epilogue epilogue;
  float alpha, beta;
};

std::unique_ptr<MatmulPlan> make_plan(const PlanArgs& p) {
  const auto [batch, M, K, N] = p.shape;
  auto plan = std::make_unique<MatmulPlan>();
  plan->a = matrix_desc(batch, M, K, p.a);
  plan->b = matrix_desc(batch, K, N, p.b);
  plan->bias = p.has_bias ? dnnl::memory::desc(dims{1, N}, dt::f32, dims{N, 1}) : dnnl::memory::desc();
  plan->out = batch == 1 ? dnnl::memory::desc(dims{M, N}, dt::f32, dims{N, 1})
                         : dnnl::memory::desc(dims{batch, M, N}, dt::f32, dims{M * N, N, 1});
  dnnl::post_ops post;
  if (p.beta != 0.f) post.append_sum(p.beta);  // out = alpha * a @ b + beta * out
  switch (p.epilogue) {
    case Epilogue::None: break;
    case Epilogue::Relu: post.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); break;
    case Epilogue::Gelu: post.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f); break;
    case Epilogue::GeluTanh: post.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f); break;
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(post);
  if (p.alpha != 1.f) attr.set_output_scales(0, {p.alpha});
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours per call: safe from any thread
  auto desc = p.has_bias ? dnnl::matmul::desc(plan->a, plan->b, plan->bias, plan->out)
                         : dnnl::matmul::desc(plan->a, plan->b, plan->out);
  plan->pd = dnnl::matmul::primitive_desc(desc, attr, onednn::cpu_engine());
  plan->matmul = dnnl::matmul(plan->pd);
  return plan;
}

int64_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

bool run_gemm(const PlanArgs& p, const float* bias, float* out) {
  static onednn::PlanCache<MatmulPlan, 14> cache;
  const auto [batch, M, K, N] = p.shape;
  const onednn::Key<14> key{batch, M, K, N, p.a.transposed, p.a.ld, p.a.batch_stride, p.b.transposed, p.b.ld,
                            p.b.batch_stride, p.has_bias, static_cast<int64_t>(p.epilogue), bits_of(p.alpha),
                            bits_of(p.beta)};
  std::shared_ptr<MatmulPlan> plan;
  try {
    plan = cache.get(key, [&] { return make_plan(p); });
  } catch (const dnnl::error&) {
    return false;  // no implementation for this shape on this CPU
  }
  onednn::set_omp_threads();
  const dnnl::engine& engine = onednn::cpu_engine();
  dnnl::stream stream(engine);
  onednn::Buffer scratch(plan->pd.scratchpad_desc());
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, dnnl::memory(plan->a, engine, const_cast<float*>(p.a.data))},
      {DNNL_ARG_WEIGHTS, dnnl::memory(plan->b, engine, const_cast<float*>(p.b.data))},
      {DNNL_ARG_DST, dnnl::memory(plan->out, engine, out)},
      {DNNL_ARG_SCRATCHPAD, scratch.memory}};
  if (p.has_bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plan->bias, engine, const_cast<float*>(bias)));
  plan->matmul.execute(stream, args);
  stream.wait();
  return true;
}

}  // namespace

bool onednn_linear(int64_t M, int64_t K, int64_t N, MatrixOperand a, MatrixOperand b, const float* bias,
                   Epilogue epilogue, float* out) {
  return run_gemm({{1, M, K, N}, a, b, bias != nullptr, epilogue, 1.f, 0.f}, bias, out);
}

bool onednn_gemm(GemmShape shape, MatrixOperand a, MatrixOperand b, float alpha, float beta, float* out) {
  if (shape.batch < 1 || shape.M == 0 || shape.N == 0 || shape.K == 0) return false;
  if (shape.batch > 1 && (a.batch_stride == 0 || b.batch_stride == 0)) return false;
  return run_gemm({shape, a, b, false, Epilogue::None, alpha, beta}, nullptr, out);
}

}  // namespace trainrun
