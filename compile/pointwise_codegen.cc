#include "compile/pointwise_codegen.h"

#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace trainrun::compile {
namespace {

using Operands = std::vector<std::string>;

// The node's non-tensor arguments after its operands (alpha, approximate, ...), and whether `out` is unset.
struct Constants {
  std::vector<const IValue*> values;
  bool out_given = false;
};

Constants constants_of(const CapturedGraph::Node& node) {
  Constants c;
  for (const CapturedGraph::Slot& s : node.args) {
    if (s.kind != CapturedGraph::Slot::Constant) continue;
    IValue& v = const_cast<IValue&>(s.constant);
    if (v.is_tensor()) {
      if (v.get<Tensor>().defined()) c.out_given = true;
      continue;  // `out`, unset
    }
    c.values.push_back(&s.constant);
  }
  return c;
}

std::optional<double> scalar_constant(const IValue* v) {
  IValue& value = const_cast<IValue&>(*v);
  const std::string type = value.type_name();
  if (type == "Scalar") return value.get<Scalar>().to_double();
  if (type == "float") return value.get<double>();
  if (type == "int") return static_cast<double>(value.get<int64_t>());
  return std::nullopt;
}

std::string f(double v) { return fmt::format("_mm256_set1_ps({:.9g}f)", v); }

struct OpCode {
  int operands;
  std::vector<LaneType> lanes;  // per operand
  LaneType result;
  // The expression, or nullopt when the constants are ones it has no code for.
  std::function<std::optional<std::string>(const Operands&, const Constants&)> emit;
};

OpCode unary(std::string expr) {
  return {1, {LaneType::Float}, LaneType::Float,
          [expr](const Operands& o, const Constants& c) -> std::optional<std::string> {
            if (!c.values.empty()) return std::nullopt;
            return fmt::format(fmt::runtime(expr), o[0]);
          }};
}

OpCode binary(std::string expr) {
  return {2, {LaneType::Float, LaneType::Float}, LaneType::Float,
          [expr](const Operands& o, const Constants& c) -> std::optional<std::string> {
            if (!c.values.empty()) return std::nullopt;
            return fmt::format(fmt::runtime(expr), o[0], o[1]);
          }};
}

OpCode compare(const char* predicate) {
  std::string p = predicate;
  return {2, {LaneType::Float, LaneType::Float}, LaneType::Mask,
          [p](const Operands& o, const Constants&) -> std::optional<std::string> {
            return fmt::format("_mm256_cmp_ps({}, {}, {})", o[0], o[1], p);
          }};
}

// a + alpha * b, as add and sub (alpha negated) compute it.
OpCode with_alpha(bool subtract) {
  return {2, {LaneType::Float, LaneType::Float}, LaneType::Float,
          [subtract](const Operands& o, const Constants& c) -> std::optional<std::string> {
            const std::optional<double> alpha = c.values.empty() ? 1.0 : scalar_constant(c.values[0]);
            if (!alpha) return std::nullopt;
            if (*alpha == 1.0) return fmt::format("_mm256_{}_ps({}, {})", subtract ? "sub" : "add", o[0], o[1]);
            return fmt::format("_mm256_{}_ps({}, _mm256_mul_ps({}, {}))", subtract ? "sub" : "add", o[0], f(*alpha),
                               o[1]);
          }};
}

const std::map<std::string, OpCode>& op_codes() {
  static const std::map<std::string, OpCode> codes = {
      {"add", with_alpha(false)},
      {"sub", with_alpha(true)},
      {"mul", binary("_mm256_mul_ps({}, {})")},
      {"div", binary("_mm256_div_ps({}, {})")},
      {"neg", unary("_mm256_xor_ps({}, _mm256_set1_ps(-0.0f))")},
      {"abs", unary("_mm256_andnot_ps(_mm256_set1_ps(-0.0f), {})")},
      // max(0, x) gives x when x is NaN (the second operand), as x > 0 ? x : 0 does not: PyTorch keeps NaN.
      {"relu", unary("_mm256_max_ps(_mm256_setzero_ps(), {})")},
      {"exp", unary("Sleef_expf8_u10avx2({})")},
      {"log", unary("Sleef_logf8_u10avx2({})")},
      {"log1p", unary("Sleef_log1pf8_u10avx2({})")},
      {"tanh", unary("Sleef_tanhf8_u10avx2({})")},
      {"erf", unary("Sleef_erff8_u10avx2({})")},
      {"sin", unary("Sleef_sinf8_u10avx2({})")},
      {"cos", unary("Sleef_cosf8_u10avx2({})")},
      {"sqrt", unary("_mm256_sqrt_ps({})")},
      {"rsqrt", unary("_mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps({}))")},
      {"sigmoid", unary("tr_sigmoid({})")},
      {"silu", unary("_mm256_mul_ps({0}, tr_sigmoid({0}))")},
      {"gelu",
       {1, {LaneType::Float}, LaneType::Float, [](const Operands& o, const Constants& c) -> std::optional<std::string> {
          IValue& a = const_cast<IValue&>(*c.values.at(0));
          if (std::string(a.type_name()) != "str") return std::nullopt;
          if (a.get<std::string>() == "none") return fmt::format("tr_gelu({})", o[0]);
          if (a.get<std::string>() == "tanh") return fmt::format("tr_gelu_tanh({})", o[0]);
          return std::nullopt;
        }}},
      {"gt", compare("_CMP_GT_OQ")},
      {"lt", compare("_CMP_LT_OQ")},
      {"ge", compare("_CMP_GE_OQ")},
      {"le", compare("_CMP_LE_OQ")},
      {"eq", compare("_CMP_EQ_OQ")},
      {"ne", compare("_CMP_NEQ_UQ")},
      {"where",
       {3, {LaneType::Mask, LaneType::Float, LaneType::Float}, LaneType::Float,
        [](const Operands& o, const Constants&) -> std::optional<std::string> {
          return fmt::format("_mm256_blendv_ps({}, {}, {})", o[2], o[1], o[0]);
        }}},
      {"addcmul",
       {3, {LaneType::Float, LaneType::Float, LaneType::Float}, LaneType::Float,
        [](const Operands& o, const Constants& c) -> std::optional<std::string> {
          const std::optional<double> v = c.values.empty() ? 1.0 : scalar_constant(c.values[0]);
          if (!v) return std::nullopt;
          return fmt::format("_mm256_add_ps({}, _mm256_mul_ps({}, _mm256_mul_ps({}, {})))", o[0], f(*v), o[1], o[2]);
        }}},
      {"lerp",
       {3, {LaneType::Float, LaneType::Float, LaneType::Float}, LaneType::Float,
        [](const Operands& o, const Constants&) -> std::optional<std::string> {
          return fmt::format("_mm256_add_ps({0}, _mm256_mul_ps({2}, _mm256_sub_ps({1}, {0})))", o[0], o[1], o[2]);
        }}},
  };
  return codes;
}

const OpCode* code_of(const CapturedGraph::Node& node) {
  if (node.op == nullptr) return nullptr;
  auto it = op_codes().find(node.op->name());
  return it == op_codes().end() ? nullptr : &it->second;
}

}  // namespace

bool is_fusable_pointwise(const CapturedGraph::Node& node, LaneType* result) {
  const OpCode* code = code_of(node);
  if (code == nullptr || node.results.size() != 1 || node.results[0].kind != CapturedGraph::Slot::Value) return false;
  int operands = 0;
  for (const CapturedGraph::Slot& s : node.args) {
    if (s.kind == CapturedGraph::Slot::ValueList) return false;
    if (s.kind == CapturedGraph::Slot::Value) ++operands;
  }
  if (operands != code->operands) return false;
  const Constants c = constants_of(node);
  if (c.out_given) return false;
  Operands names(static_cast<size_t>(operands), "x");
  if (!code->emit(names, c)) return false;
  *result = code->result;
  return true;
}

std::vector<LaneType> operand_lane_types(const CapturedGraph::Node& node) { return code_of(node)->lanes; }

std::string loops_prelude() {
  return R"(// Generated by trainrun.compile (compile/pointwise_codegen.cc): fused pointwise loops.
#include <immintrin.h>
#include <sleef.h>
#include <cstdint>

#define TR_INLINE static inline __attribute__((always_inline))
template <bool kFull> TR_INLINE __m256 tr_load(const float* p, __m256i m) {
  return kFull ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
template <bool kFull> TR_INLINE void tr_store(float* p, __m256 v, __m256i m) {
  if (kFull) _mm256_storeu_ps(p, v); else _mm256_maskstore_ps(p, m, v);
}
TR_INLINE __m256i tr_tail_mask(int64_t left) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lanes);
}
TR_INLINE __m256 tr_sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Sleef_expf8_u10avx2(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)))));
}
// GELU's erf, as the eager GELU computes it (tensor/cpu/vec_math.h, erf_gelu: Abramowitz and Stegun 7.1.26).
TR_INLINE __m256 tr_erf_gelu(__m256 x) {
  const __m256 sign = _mm256_and_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 a = _mm256_xor_ps(sign, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
  __m256 r = _mm256_fmadd_ps(_mm256_set1_ps(1.061405429f), t, _mm256_set1_ps(-1.453152027f));
  r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(1.421413741f));
  r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(-0.284496736f));
  r = _mm256_fmadd_ps(r, t, _mm256_set1_ps(0.254829592f));
  const __m256 e = Sleef_expf8_u10avx2(_mm256_xor_ps(_mm256_set1_ps(-0.0f), _mm256_mul_ps(x, x)));
  return _mm256_xor_ps(sign, _mm256_fnmadd_ps(_mm256_mul_ps(e, t), r, one));
}
TR_INLINE __m256 tr_gelu(__m256 x) {  // x/2 (1 + erf(x / sqrt 2))
  const __m256 e = tr_erf_gelu(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}
TR_INLINE __m256 tr_gelu_tanh(__m256 x) {  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                     _mm256_add_ps(x, _mm256_mul_ps(_mm256_set1_ps(0.044715f), x3)));
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)),
                       _mm256_add_ps(_mm256_set1_ps(1.0f), Sleef_tanhf8_u10avx2(inner)));
}
)";
}

std::string loop_source(const std::string& name, const LoopPlan& plan) {
  std::string body;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const int v = plan.inputs[i];
    switch (plan.input_kinds[i]) {
      case FusedKernel::InputKind::Full:
        body += fmt::format("  const __m256 v{} = tr_load<kFull>(in[{}] + i, m);\n", v, i);
        break;
      case FusedKernel::InputKind::Column:
        body += fmt::format("  const __m256 v{} = tr_load<kFull>(in[{}] + c, m);\n", v, i);
        break;
      case FusedKernel::InputKind::Row:
        body += fmt::format("  const __m256 v{} = _mm256_set1_ps(in[{}][r]);\n", v, i);
        break;
      case FusedKernel::InputKind::Scalar:
        body += fmt::format("  const __m256 v{} = _mm256_set1_ps(in[{}][0]);\n", v, i);
        break;
    }
  }
  for (const LoopPlan::Step& step : plan.steps) {
    if (step.cast) {
      const int src = step.operands[0];
      const std::string value = step.cast_from_mask ? fmt::format("_mm256_and_ps(v{}, _mm256_set1_ps(1.0f))", src)
                                                    : fmt::format("v{}", src);
      body += fmt::format("  const __m256 v{} = {};  // copy_ (a cast)\n", step.result, value);
      continue;
    }
    const OpCode& code = *code_of(*step.node);
    Operands names;
    for (int v : step.operands) names.push_back(fmt::format("v{}", v));
    body += fmt::format("  const __m256 v{} = {};  // {}\n", step.result, *code.emit(names, constants_of(*step.node)),
                        step.node->op->name());
  }
  for (size_t k = 0; k < plan.outputs.size(); ++k)
    body += fmt::format("  tr_store<kFull>(out[{}] + i, v{}, m);\n", k, plan.outputs[k]);
  return fmt::format(R"(
template <bool kFull>
TR_INLINE void {0}_step(const float* const* in, float* const* out, int64_t r, int64_t i, int64_t c, __m256i m) {{
{1}}}
extern "C" void {0}(const float* const* in, float* const* out, int64_t rows, int64_t cols) {{
  const __m256i all = _mm256_set1_epi32(-1);
  for (int64_t r = 0; r < rows; ++r) {{
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {0}_step<true>(in, out, r, r * cols + c, c, all);
    if (c < cols) {0}_step<false>(in, out, r, r * cols + c, c, tr_tail_mask(cols - c));
  }}
}}
)",
                     name, body);
}

}  // namespace trainrun::compile
