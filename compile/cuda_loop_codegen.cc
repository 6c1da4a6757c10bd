#include "compile/cuda_loop_codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "base/error.h"

namespace trainrun::compile {
namespace {

using Operands = std::vector<std::string>;
using Emit = std::function<std::optional<std::string>(const Operands&, const std::vector<const IValue*>&)>;

Emit expr(std::string pattern) {
  return [pattern](const Operands& o, const std::vector<const IValue*>& c) -> std::optional<std::string> {
    if (!c.empty()) return std::nullopt;
    if (o.size() == 1) return fmt::format(fmt::runtime(pattern), o[0]);
    if (o.size() == 2) return fmt::format(fmt::runtime(pattern), o[0], o[1]);
    return fmt::format(fmt::runtime(pattern), o[0], o[1], o[2]);
  };
}

// a + alpha * b (sub: alpha negated), as add and sub compute it.
Emit with_alpha(bool subtract) {
  return [subtract](const Operands& o, const std::vector<const IValue*>& c) -> std::optional<std::string> {
    const std::optional<double> alpha = loop_multiplier(c);
    if (!alpha) return std::nullopt;
    const char* sign = subtract ? "-" : "+";
    if (*alpha == 1.0) return fmt::format("({} {} {})", o[0], sign, o[1]);
    return fmt::format("({} {} {} * {})", o[0], sign, float_literal(*alpha), o[1]);
  };
}

// Per op (every name fusable_op_names() lists): its CUDA expression, as tensor/elementwise_math.h computes it
// in float. Comparisons give bool.
const std::map<std::string, Emit>& cuda_ops() {
  static const std::map<std::string, Emit> ops = {
      {"add", with_alpha(false)},
      {"sub", with_alpha(true)},
      {"mul", expr("({} * {})")},
      {"div", expr("({} / {})")},
      {"neg", expr("(-{})")},
      {"abs", expr("fabsf({})")},
      {"relu", expr("tr_relu({})")},
      {"exp", expr("expf({})")},
      {"log", expr("logf({})")},
      {"log1p", expr("log1pf({})")},
      {"tanh", expr("tanhf({})")},
      {"erf", expr("erff({})")},
      {"sin", expr("sinf({})")},
      {"cos", expr("cosf({})")},
      {"sqrt", expr("sqrtf({})")},
      {"rsqrt", expr("(1.0f / sqrtf({}))")},
      {"sigmoid", expr("(1.0f / (1.0f + expf(-{})))")},
      {"silu", expr("({0} / (1.0f + expf(-{0})))")},
      {"pow", expr("powf({}, {})")},
      {"gelu",
       [](const Operands& o, const std::vector<const IValue*>& c) -> std::optional<std::string> {
         const std::optional<std::string> approximate = loop_gelu_approximate(c);
         if (!approximate) return std::nullopt;
         return fmt::format(*approximate == "tanh" ? "tr_gelu_tanh({})" : "tr_gelu({})", o[0]);
       }},
      {"gelu_backward",
       [](const Operands& o, const std::vector<const IValue*>& c) -> std::optional<std::string> {
         const std::optional<std::string> approximate = loop_gelu_approximate(c);
         if (approximate != "none") return std::nullopt;
         return fmt::format("tr_gelu_backward({}, {})", o[0], o[1]);
       }},
      {"gt", expr("({} > {})")},
      {"lt", expr("({} < {})")},
      {"ge", expr("({} >= {})")},
      {"le", expr("({} <= {})")},
      {"eq", expr("({} == {})")},
      {"ne", expr("({} != {})")},
      {"where", expr("({} ? {} : {})")},
      {"addcmul",
       [](const Operands& o, const std::vector<const IValue*>& c) -> std::optional<std::string> {
         const std::optional<double> v = loop_multiplier(c);
         if (!v) return std::nullopt;
         return fmt::format("({} + {} * ({} * {}))", o[0], float_literal(*v), o[1], o[2]);
       }},
      {"lerp", expr("tr_lerp({}, {}, {})")},
  };
  return ops;
}

// The statements of one phase for element (r, c) at i = r * cols + c.
std::string phase_body(const LoopPlan& plan, const LoopLayout& layout, int phase, const char* indent) {
  std::string body;
  std::map<int, bool> defined;
  auto type = [&](int v) { return layout.is_mask.count(v) && layout.is_mask.at(v) ? "bool" : "float"; };
  auto load = [&](int v) {
    if (defined[v]) return;
    defined[v] = true;
    if (auto in = layout.input_of.find(v); in != layout.input_of.end()) {
      static_assert(static_cast<int>(FusedKernel::InputKind::Scalar) == 3, "kLoads follows InputKind's order");
      static const char* const kLoads[] = {"in{}[i]", "in{}[c]", "in{}[r]", "in{}[0]"};
      const bool by_value = in->second < plan.host_scalar.size() && plan.host_scalar[in->second];
      body += fmt::format("{}const float v{} = {};\n", indent, v,
                          by_value ? fmt::format("in{}_value", in->second)
                                   : fmt::format(fmt::runtime(kLoads[static_cast<int>(plan.input_kinds[in->second])]),
                                                 in->second));
    } else if (auto row = layout.row_reduction_of.find(v); row != layout.row_reduction_of.end()) {
      body += fmt::format("{}const float v{} = rv{};\n", indent, v, row->second);
    } else if (auto o = layout.output_of.find(v); o != layout.output_of.end()) {
      body += fmt::format("{}const float v{} = out{}[i];  // from an earlier pass\n", indent, v, o->second);
    } else {
      const size_t k = layout.scratch_of.at(v);
      body += std::string(type(v)) == "bool"
                  ? fmt::format("{}const bool v{} = sc{}[c] != 0.0f;  // from an earlier pass\n", indent, v, k)
                  : fmt::format("{}const float v{} = sc{}[c];  // from an earlier pass\n", indent, v, k);
    }
  };
  for (const LoopPlan::Step& step : plan.steps) {
    if (step.phase != phase) continue;
    for (int v : step.operands) load(v);
    const std::string x = fmt::format("v{}", step.operands.empty() ? -1 : step.operands[0]);
    switch (step.reduction) {
      case Reduction::RowSum:
        body += fmt::format("{}acc{} += {};  // {}\n", indent, layout.row_reduction_of.at(step.result), x,
                            step.node->op->name());
        continue;
      case Reduction::RowMax:
        body += fmt::format("{0}acc{1} = tr_max(acc{1}, {2});  // {3}\n", indent,
                            layout.row_reduction_of.at(step.result), x, step.node->op->name());
        continue;
      case Reduction::ColumnSum:
        body += fmt::format("{}ca{}[c] += {};  // {}\n", indent, layout.column_reduction_of.at(step.result), x,
                            step.node->op->name());
        continue;
      case Reduction::None:
        break;
    }
    defined[step.result] = true;
    if (step.cast) {
      const std::string value = step.cast_from_mask ? fmt::format("({} ? 1.0f : 0.0f)", x) : x;
      body += fmt::format("{}const float v{} = {};  // copy_ (a cast)\n", indent, step.result, value);
    } else {
      const std::string& name = step.node->op->name();
      auto op = cuda_ops().find(name);
      TR_CHECK(op != cuda_ops().end(), ValueError, "CUDA fused loop: no code for op '{}'", name);
      Operands names;
      for (int v : step.operands) names.push_back(fmt::format("v{}", v));
      const std::optional<std::string> e = op->second(names, loop_op_constants(*step.node));
      TR_CHECK(e.has_value(), ValueError, "CUDA fused loop: no code for op '{}' with these arguments", name);
      body += fmt::format("{}const {} v{} = {};  // {}\n", indent, type(step.result), step.result, *e, name);
    }
    if (auto o = layout.output_of.find(step.result); o != layout.output_of.end())
      body += fmt::format("{}out{}[i] = v{};\n", indent, o->second, step.result);
    if (auto sc = layout.scratch_of.find(step.result); sc != layout.scratch_of.end())
      body += std::string(type(step.result)) == "bool"
                  ? fmt::format("{}sc{}[c] = v{} ? 1.0f : 0.0f;\n", indent, sc->second, step.result)
                  : fmt::format("{}sc{}[c] = v{};\n", indent, sc->second, step.result);
  }
  return body;
}

std::string parameters(const LoopPlan& plan) {
  std::string p;
  for (size_t k = 0; k < plan.inputs.size(); ++k)
    p += k < plan.host_scalar.size() && plan.host_scalar[k] ? fmt::format("float in{}_value, ", k)
                                                            : fmt::format("const float* __restrict__ in{}, ", k);
  for (size_t k = 0; k < plan.outputs.size(); ++k) p += fmt::format("float* __restrict__ out{}, ", k);
  return p + "float* __restrict__ work, long long rows, long long cols";
}

std::string unused(const LoopPlan& plan) {
  std::string u = "  (void)work; (void)rows; (void)cols;";
  for (size_t k = 0; k < plan.inputs.size(); ++k)
    u += fmt::format(k < plan.host_scalar.size() && plan.host_scalar[k] ? " (void)in{}_value;" : " (void)in{};", k);
  for (size_t k = 0; k < plan.outputs.size(); ++k) u += fmt::format(" (void)out{};", k);
  return u + "\n";
}

std::string flat_kernel(const std::string& name, const LoopPlan& plan, const LoopLayout& layout) {
  return fmt::format(R"(
extern "C" __global__ void {0}({1}) {{
{2}  const long long n = rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {{
    const long long r = i / cols, c = i - r * cols;
    (void)r; (void)c;
{3}  }}
}}
)",
                     name, parameters(plan), unused(plan), phase_body(plan, layout, 0, "    "));
}

std::string row_kernel(const std::string& name, const LoopPlan& plan, const LoopLayout& layout) {
  std::string slices;  // this block's row-sized slices of work
  for (size_t k = 0; k < layout.scratch_of.size(); ++k)
    slices += fmt::format("  float* sc{0} = work + ((long long){0} * gridDim.x + blockIdx.x) * cols;\n", k);
  for (size_t j = 0; j < layout.column_reduction_of.size(); ++j)
    slices += fmt::format(
        "  float* ca{0} = work + ((long long){1} * gridDim.x + blockIdx.x) * cols;\n"
        "  for (long long c = threadIdx.x; c < cols; c += blockDim.x) ca{0}[c] = 0.0f;\n",
        j, layout.scratch_of.size() + j);
  std::string passes;
  for (int p = 0; p < layout.phases; ++p) {
    std::string start, finish;
    for (const LoopPlan::Step& step : plan.steps) {
      if (step.phase != p || (step.reduction != Reduction::RowSum && step.reduction != Reduction::RowMax)) continue;
      const size_t k = layout.row_reduction_of.at(step.result);
      const bool sum = step.reduction == Reduction::RowSum;
      start += fmt::format("    float acc{} = {};\n", k, sum ? "0.0f" : "-__int_as_float(0x7f800000)");
      finish += sum ? fmt::format("    const float rv{0} = tr_block_sum(acc{0}, tr_shared){1};\n", k,
                                  step.mean ? " * (float)(1.0 / (double)cols)" : "")
                    : fmt::format("    const float rv{0} = tr_block_max(acc{0}, tr_shared);\n", k);
      if (auto o = layout.output_of.find(step.result); o != layout.output_of.end())
        finish += fmt::format("    if (threadIdx.x == 0) out{}[r] = rv{};\n", o->second, k);
    }
    passes += fmt::format(R"(    // pass {0}
{1}    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {{
      const long long i = r * cols + c;
      (void)i;
{2}    }}
{3}    (void)tr_shared;
)",
                          p, start, phase_body(plan, layout, p, "      "), finish);
  }
  return fmt::format(R"(
extern "C" __global__ void {0}({1}) {{
  __shared__ float tr_shared[32];
{2}{3}  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {{
{4}  }}
}}
)",
                     name, parameters(plan), unused(plan), slices, passes);
}

std::string columns_kernel(const std::string& name, const LoopPlan& plan, const LoopLayout& layout) {
  std::vector<const LoopPlan::Step*> sums(layout.column_reduction_of.size());
  for (const LoopPlan::Step& step : plan.steps)
    if (step.reduction == Reduction::ColumnSum) sums[layout.column_reduction_of.at(step.result)] = &step;
  std::string params = "const float* __restrict__ work, ", body;
  for (size_t j = 0; j < sums.size(); ++j) {
    params += fmt::format("float* __restrict__ sum{}, ", j);
    body += fmt::format(
        "    float s{0} = 0.0f;\n"
        "    for (int b = 0; b < blocks; ++b) s{0} += work[((long long){1} * blocks + b) * cols + c];\n"
        "    sum{0}[c] = s{0}{2};\n",
        j, layout.scratch_of.size() + j, sums[j]->mean ? " * (float)(1.0 / (double)rows)" : "");
  }
  return fmt::format(R"(
extern "C" __global__ void {0}_columns({1}long long rows, long long cols, int blocks) {{
  (void)rows;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < cols; c += step) {{
{2}  }}
}}
)",
                     name, params, body);
}

}  // namespace

CudaLoopShape cuda_loop_shape(const LoopPlan& plan) {
  const LoopLayout layout(plan);
  CudaLoopShape shape;
  shape.by_row = layout.reduces();
  shape.scratch = layout.scratch_of.size();
  shape.column_sums = layout.column_reduction_of.size();
  shape.host_scalar = plan.host_scalar;
  shape.host_scalar.resize(plan.inputs.size(), 0);
  shape.column_sum_outputs.resize(shape.column_sums);
  for (const auto& [value, j] : layout.column_reduction_of) shape.column_sum_outputs[j] = layout.output_of.at(value);
  return shape;
}

bool cuda_loop_fits(const LoopPlan& plan, int64_t rows, int64_t cols) {
  // (132 multiprocessors on an H100/H200: fewer rows than that leave most of the GPU idle; 4096 columns are 16
  // passes of a 256-thread block, about where one block's pass costs more than a split reduction's two launches)
  constexpr int64_t kFewRows = 128, kLongRow = 4096;
  return LoopLayout(plan).row_reduction_of.empty() || rows >= kFewRows || cols < kLongRow;
}

std::string cuda_loop_source(const std::string& name, const LoopPlan& plan) {
  const LoopLayout layout(plan);
  if (!layout.reduces()) return flat_kernel(name, plan, layout);
  std::string source = row_kernel(name, plan, layout);
  if (!layout.column_reduction_of.empty()) source += columns_kernel(name, plan, layout);
  return source;
}

std::string cuda_loops_prelude() {
  return R"(// Generated by trainrun.compile (compile/cuda_loop_codegen.cc): fused loops for CUDA.
#define TR_D static __device__ __forceinline__
TR_D float tr_relu(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }  // NaN passes through
TR_D float tr_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
TR_D float tr_gelu_backward(float g, float x) {  // g (Phi(x) + x phi(x))
  return g * (0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * expf(-0.5f * x * x) * 0.39894228040143268f);
}
TR_D float tr_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}
// a + w (b - a) in PyTorch's form, exact at w = 0 and w = 1.
TR_D float tr_lerp(float a, float b, float w) {
  return (w < 0.5f && w > -0.5f) ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}
TR_D float tr_max(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }  // NaN wins
// Block-wide sum and max (blockDim.x a multiple of 32): every thread gets the result.
TR_D float tr_block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // (a previous reduction's readers are done with shared)
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (blockDim.x >> 5) ? shared[threadIdx.x & 31] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
TR_D float tr_block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = tr_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = v;
  __syncthreads();
  v = (threadIdx.x & 31) < (blockDim.x >> 5) ? shared[threadIdx.x & 31] : -__int_as_float(0x7f800000);
  for (int o = 16; o > 0; o >>= 1) v = tr_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
)";
}

}  // namespace trainrun::compile
