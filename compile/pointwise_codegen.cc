#include "compile/pointwise_codegen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

}  // namespace

std::string float_literal(double v) {
  std::string s = fmt::format("{:.9g}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // (2f is not a literal; 2.0f is)
  return s + "f";
}

std::optional<double> loop_multiplier(const std::vector<const IValue*>& constants) {
  if (constants.empty()) return 1.0;
  const std::optional<double> d = loop_scalar_constant(*constants[0]);
  return d && std::isfinite(*d) ? d : std::nullopt;  // (a number with no literal: the op is not fused)
}

std::optional<std::string> loop_gelu_approximate(const std::vector<const IValue*>& constants) {
  if (constants.size() != 1) return std::nullopt;
  IValue& a = const_cast<IValue&>(*constants[0]);
  if (std::string(a.type_name()) != "str") return std::nullopt;
  const std::string& v = a.get<std::string>();
  return v == "none" || v == "tanh" ? std::optional<std::string>(v) : std::nullopt;
}

std::optional<double> loop_scalar_constant(const IValue& v) {
  IValue& value = const_cast<IValue&>(v);
  const std::string type = value.type_name();
  if (type == "Scalar") return value.get<Scalar>().to_double();
  if (type == "float") return value.get<double>();
  if (type == "int") return static_cast<double>(value.get<int64_t>());
  return std::nullopt;
}

namespace {

std::string f(double v) { return fmt::format("_mm256_set1_ps({})", float_literal(v)); }

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
            const std::optional<double> alpha = loop_multiplier(c.values);
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
      {"pow", binary("tr_pow({}, {})")},
      {"silu", unary("_mm256_mul_ps({0}, tr_sigmoid({0}))")},
      {"gelu",
       {1, {LaneType::Float}, LaneType::Float, [](const Operands& o, const Constants& c) -> std::optional<std::string> {
          const std::optional<std::string> approximate = loop_gelu_approximate(c.values);
          if (!approximate) return std::nullopt;
          return fmt::format(*approximate == "tanh" ? "tr_gelu_tanh({})" : "tr_gelu({})", o[0]);
        }}},
      {"gelu_backward",  // (the erf form, as the eager kernel computes it)
       {2, {LaneType::Float, LaneType::Float}, LaneType::Float,
        [](const Operands& o, const Constants& c) -> std::optional<std::string> {
          const std::optional<std::string> approximate = loop_gelu_approximate(c.values);
          if (approximate != "none") return std::nullopt;
          return fmt::format("tr_gelu_backward({}, {})", o[0], o[1]);
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
          const std::optional<double> v = loop_multiplier(c.values);
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

std::vector<std::string> fusable_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, code] : op_codes()) names.push_back(name);
  return names;
}

std::vector<const IValue*> loop_op_constants(const CapturedGraph::Node& node) { return constants_of(node).values; }

std::string loops_prelude() {
  return R"(// Generated by trainrun.compile (compile/pointwise_codegen.cc): fused pointwise loops.
#include <immintrin.h>
#include <sleef.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define TR_INLINE static inline __attribute__((always_inline))
template <bool kFull> TR_INLINE __m256 tr_load(const float* p, __m256i m) {
  return kFull ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
template <bool kFull> TR_INLINE void tr_store(float* p, __m256 v, __m256i m) {
  if (kFull) _mm256_storeu_ps(p, v); else _mm256_maskstore_ps(p, m, v);
}
// A masked tail's lanes past the end as 0 (a sum's identity).
template <bool kFull> TR_INLINE __m256 tr_lanes(__m256 v, __m256i m) {
  return kFull ? v : _mm256_and_ps(v, _mm256_castsi256_ps(m));
}
// max(acc, v) lane by lane where NaN wins (as eager's amax); a masked tail's lanes past the end leave acc.
template <bool kFull> TR_INLINE __m256 tr_max_into(__m256 acc, __m256 v, __m256i m) {
  // max_ps(v, acc) gives acc when either is NaN: a NaN acc stays; a NaN v is taken by the blend.
  __m256 r = _mm256_blendv_ps(_mm256_max_ps(v, acc), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return kFull ? r : _mm256_blendv_ps(acc, r, _mm256_castsi256_ps(m));
}
template <bool kFull> TR_INLINE void tr_add_into(float* p, __m256 v, __m256i m) {
  tr_store<kFull>(p, _mm256_add_ps(tr_load<kFull>(p, m), v), m);
}
TR_INLINE double tr_hsum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  double s = 0;
  for (float x : lanes) s += x;
  return s;
}
TR_INLINE float tr_hmax(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float m = lanes[0];
  for (float x : lanes) m = (x != x || m != m) ? x + m : (x > m ? x : m);
  return m;
}
TR_INLINE __m256i tr_tail_mask(int64_t left) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left)), lanes);
}
TR_INLINE __m256 tr_sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Sleef_expf8_u10avx2(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)))));
}
// x * x where the exponent is 2 (exactly what std::pow gives, as eager's pow computes it), SLEEF's pow otherwise.
TR_INLINE __m256 tr_pow(__m256 x, __m256 e) {
  if (_mm256_movemask_ps(_mm256_cmp_ps(e, _mm256_set1_ps(2.0f), _CMP_EQ_OQ)) == 0xff) return _mm256_mul_ps(x, x);
  return Sleef_powf8_u10avx2(x, e);
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
TR_INLINE __m256 tr_gelu_backward(__m256 g, __m256 x) {  // g (Phi(x) + x phi(x)), as tensor/cpu/vec_math.cc's
  const __m256 cdf = _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(_mm256_set1_ps(1.0f),
                                   tr_erf_gelu(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)))));
  const __m256 pdf = _mm256_mul_ps(Sleef_expf8_u10avx2(_mm256_mul_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(-0.5f))),
                                   _mm256_set1_ps(0.39894228040143268f));
  return _mm256_mul_ps(g, _mm256_fmadd_ps(x, pdf, cdf));
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

LoopLayout::LoopLayout(const LoopPlan& plan) {
  for (size_t i = 0; i < plan.inputs.size(); ++i) input_of[plan.inputs[i]] = i;
  for (size_t k = 0; k < plan.outputs.size(); ++k) output_of[plan.outputs[k]] = k;
  for (const LoopPlan::Step& step : plan.steps) {
    step_of[step.result] = &step;
    phases = std::max(phases, step.phase + 1);
    if (step.reduction == Reduction::RowSum || step.reduction == Reduction::RowMax)
      row_reduction_of.emplace(step.result, row_reduction_of.size());
    if (step.reduction == Reduction::ColumnSum) column_reduction_of.emplace(step.result, column_reduction_of.size());
    LaneType lane = LaneType::Float;
    if (!step.cast && step.reduction == Reduction::None) is_fusable_pointwise(*step.node, &lane);
    is_mask[step.result] = lane == LaneType::Mask;
  }
  for (const LoopPlan::Step& step : plan.steps)
    for (int v : step.operands) {
      auto it = step_of.find(v);
      if (it == step_of.end() || it->second->reduction != Reduction::None) continue;
      if (it->second->phase < step.phase && !output_of.count(v) && !scratch_of.count(v))
        scratch_of.emplace(v, scratch_of.size());
    }
}

namespace {

// The body of one pass over a row: loads, the steps of `phase`, stores.
std::string phase_body(const LoopPlan& plan, const LoopLayout& layout, int phase) {
  std::string body;
  std::map<int, bool> defined;  // values the body has a variable for
  auto load = [&](int v) {
    if (defined[v]) return;
    defined[v] = true;
    if (auto in = layout.input_of.find(v); in != layout.input_of.end()) {
      // Per input kind (FusedKernel::InputKind's order): in full, by column, by row, one number.
      static_assert(static_cast<int>(FusedKernel::InputKind::Scalar) == 3, "kLoads follows InputKind's order");
      static const char* const kLoads[] = {"tr_load<kFull>(in[{}] + i, m)", "tr_load<kFull>(in[{}] + c, m)",
                                           "_mm256_set1_ps(in[{}][r])", "_mm256_set1_ps(in[{}][0])"};
      const std::string load = fmt::format(fmt::runtime(kLoads[static_cast<int>(plan.input_kinds[in->second])]),
                                           in->second);
      body += fmt::format("  const __m256 v{} = {};\n", v, load);
    } else if (auto row = layout.row_reduction_of.find(v); row != layout.row_reduction_of.end()) {
      body += fmt::format("  const __m256 v{} = _mm256_set1_ps(rv[{}]);\n", v, row->second);
    } else if (auto o = layout.output_of.find(v); o != layout.output_of.end()) {
      body += fmt::format("  const __m256 v{} = tr_load<kFull>(out[{}] + i, m);  // from an earlier pass\n", v, o->second);
    } else {
      body += fmt::format("  const __m256 v{} = tr_load<kFull>(sc[{}] + c, m);  // from an earlier pass\n", v,
                          layout.scratch_of.at(v));
    }
  };
  for (const LoopPlan::Step& step : plan.steps) {
    if (step.phase != phase) continue;
    for (int v : step.operands) load(v);
    const std::string x = fmt::format("v{}", step.operands.empty() ? -1 : step.operands[0]);
    switch (step.reduction) {
      case Reduction::RowSum:
        body += fmt::format("  acc[{}] = _mm256_add_ps(acc[{}], tr_lanes<kFull>({}, m));  // {}\n",
                            layout.row_reduction_of.at(step.result), layout.row_reduction_of.at(step.result), x,
                            step.node->op->name());
        continue;
      case Reduction::RowMax:
        body += fmt::format("  acc[{0}] = tr_max_into<kFull>(acc[{0}], {1}, m);  // {2}\n",
                            layout.row_reduction_of.at(step.result), x, step.node->op->name());
        continue;
      case Reduction::ColumnSum:
        body += fmt::format("  tr_add_into<kFull>(ca[{}] + c, {}, m);  // {}\n",
                            layout.column_reduction_of.at(step.result), x, step.node->op->name());
        continue;
      case Reduction::None:
        break;
    }
    defined[step.result] = true;
    if (step.cast) {
      const std::string value = step.cast_from_mask ? fmt::format("_mm256_and_ps({}, _mm256_set1_ps(1.0f))", x) : x;
      body += fmt::format("  const __m256 v{} = {};  // copy_ (a cast)\n", step.result, value);
    } else {
      const OpCode& code = *code_of(*step.node);
      Operands names;
      for (int v : step.operands) names.push_back(fmt::format("v{}", v));
      body += fmt::format("  const __m256 v{} = {};  // {}\n", step.result,
                          *code.emit(names, constants_of(*step.node)), step.node->op->name());
    }
    if (auto o = layout.output_of.find(step.result); o != layout.output_of.end())
      body += fmt::format("  tr_store<kFull>(out[{}] + i, v{}, m);\n", o->second, step.result);
    if (auto sc = layout.scratch_of.find(step.result); sc != layout.scratch_of.end())
      body += fmt::format("  tr_store<kFull>(sc[{}] + c, v{}, m);\n", sc->second, step.result);
  }
  return body;
}

}  // namespace

std::string loop_source(const std::string& name, const LoopPlan& plan) {
  const LoopLayout layout(plan);
  const size_t num_row = layout.row_reduction_of.size(), num_col = layout.column_reduction_of.size();
  const size_t num_scratch = layout.scratch_of.size();
  std::string steps, passes;
  for (int p = 0; p < layout.phases; ++p) {
    steps += fmt::format(R"(
template <bool kFull>
TR_INLINE void {0}_pass{1}(const float* const* in, float* const* out, float* const* sc, float* const* ca, __m256* acc,
                           const float* rv, int64_t r, int64_t i, int64_t c, __m256i m) {{
  (void)in; (void)out; (void)sc; (void)ca; (void)acc; (void)rv; (void)r; (void)i; (void)c;
{2}}}
)",
                         name, p, phase_body(plan, layout, p));
    // A pass: start its row reductions, walk the row, finish them (sums add in double every 1024 columns).
    std::string start, every_1024, finish;
    for (const LoopPlan::Step& step : plan.steps) {
      if (step.phase != p || (step.reduction != Reduction::RowSum && step.reduction != Reduction::RowMax)) continue;
      const size_t k = layout.row_reduction_of.at(step.result);
      const bool sum = step.reduction == Reduction::RowSum;
      start += fmt::format("      acc[{}] = {}; rd[{}] = 0;\n", k,
                           sum ? "_mm256_setzero_ps()" : "_mm256_set1_ps(-__builtin_inff())", k);
      if (sum) every_1024 += fmt::format("          rd[{0}] += tr_hsum(acc[{0}]); acc[{0}] = _mm256_setzero_ps();\n", k);
      finish += sum ? fmt::format("      rv[{0}] = static_cast<float>((rd[{0}] + tr_hsum(acc[{0}])){1});\n", k,
                                  step.mean ? " * (1.0 / static_cast<double>(cols))" : "")
                    : fmt::format("      rv[{0}] = tr_hmax(acc[{0}]);\n", k);
      if (auto o = layout.output_of.find(step.result); o != layout.output_of.end())
        finish += fmt::format("      out[{}][r] = rv[{}];\n", o->second, k);
    }
    const std::string args = "in, out, sc, ca, acc, rv, r, r * cols + c, c";
    passes += fmt::format(R"(    {{  // pass {1}
{2}      int64_t c = 0;
      for (; c + 8 <= cols; c += 8) {{
        {0}_pass{1}<true>({3}, all);
{4}      }}
      if (c < cols) {0}_pass{1}<false>({3}, tr_tail_mask(cols - c));
{5}    }}
)",
                          name, p, start, args,
                          every_1024.empty() ? "" : "        if ((c & 1023) == 1016) {\n" + every_1024 + "        }\n",
                          finish);
  }
  // Column sums: rows add into ca[] in blocks of 128, each block then into the output (and a mean scales at the end).
  std::string column_setup, column_flush, column_scale;
  for (const LoopPlan::Step& step : plan.steps) {
    if (step.reduction != Reduction::ColumnSum) continue;
    const size_t j = layout.column_reduction_of.at(step.result);
    const size_t o = layout.output_of.at(step.result);
    column_setup += fmt::format("  ca[{0}] = work + ({1} + {0}) * cols; std::memset(ca[{0}], 0, sizeof(float) * cols);\n"
                                "  std::memset(out[{2}], 0, sizeof(float) * cols);\n",
                                j, num_scratch, o);
    column_flush += fmt::format("      for (int64_t k = 0; k < cols; ++k) {{ out[{1}][k] += ca[{0}][k]; ca[{0}][k] = 0; }}\n",
                                j, o);
    if (step.mean)
      column_scale += fmt::format("  for (int64_t k = 0; k < cols; ++k) out[{0}][k] = static_cast<float>(out[{0}][k] * "
                                  "(1.0 / static_cast<double>(rows)));\n",
                                  o);
  }
  std::string row_end;
  if (!column_flush.empty()) row_end = "    if (((r + 1) & 127) == 0 || r + 1 == rows) {\n" + column_flush + "    }\n";
  return fmt::format(R"({0}
extern "C" void {1}(const float* const* in, float* const* out, int64_t rows, int64_t cols) {{
  const __m256i all = _mm256_set1_epi32(-1);
  float* work = {2} > 0 ? static_cast<float*>(std::malloc(sizeof(float) * {2} * cols)) : nullptr;
  float* sc[{3}];
  float* ca[{4}];
  for (int k = 0; k < {5}; ++k) sc[k] = work + k * cols;
{6}  __m256 acc[{7}];
  float rv[{7}];
  double rd[{7}];
  (void)rd;
  for (int64_t r = 0; r < rows; ++r) {{
{8}{9}  }}
{10}  std::free(work);
}}
)",
                     steps, name, num_scratch + num_col, std::max<size_t>(num_scratch, 1), std::max<size_t>(num_col, 1),
                     num_scratch, column_setup, std::max<size_t>(num_row, 1), passes, row_end, column_scale);
}

}  // namespace trainrun::compile
