// Tensor printing in PyTorch's format: "tensor([[1.0000, 2.5000], ...])",
// integral floats as "1.", scientific notation for wide ranges, "..." past
// 1000 elements, and the dtype named when it is not a default one.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "tensor/ops.h"

namespace trainrun {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  bool floating = false, boolean = false, integral_values = true, sci = false;
  int width = 1;

  std::string format(double v) const {
    if (boolean) return v != 0 ? "True" : "False";
    if (!floating) return fmt::format("{}", static_cast<int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci) return fmt::format("{:.4e}", v);
    if (integral_values) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.4f}", v);
  }
  // Integers print from the exact value: int64 beyond 2^53 does not survive a double.
  std::string format(const Scalar& v) const {
    if (!floating && !boolean) return fmt::format("{}", v.to_int());
    return format(v.to_double());
  }
};

Formatter make_formatter(const std::vector<double>& values, bool floating) {
  Formatter f;
  f.floating = floating;
  if (floating) {
    double max_abs = 0, min_abs = INFINITY;
    bool any_finite = false;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      any_finite = true;
      if (v != std::nearbyint(v)) f.integral_values = false;
      double a = std::abs(v);
      max_abs = std::max(max_abs, a);
      if (a != 0) min_abs = std::min(min_abs, a);
    }
    if (any_finite && min_abs != INFINITY) {
      if (f.integral_values) f.sci = max_abs > 1e8;
      else f.sci = max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4;
    }
  }
  for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
  return f;
}

// Values printed (all, or the edges when summarizing), row-major.
void collect(const Tensor& t, bool summarize, std::vector<double>& out) {
  if (t.dim() == 0) {
    out.push_back(t.item().to_double());
    return;
  }
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    collect(t.select(0, i), summarize, out);
  }
}

void render(const Tensor& t, const Formatter& f, bool summarize, int indent, std::ostringstream& os) {
  if (t.dim() == 0) {
    std::string s = f.format(t.item());
    os << std::string(f.width - s.size(), ' ') << s;
    return;
  }
  int64_t n = t.size(0);
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) {
      os << ",";
      if (t.dim() == 1) os << " ";
      else os << std::string(t.dim() - 1, '\n') << std::string(indent + 1, ' ');
    }
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (t.dim() == 1 ? " ..." : "...");
      i = n - kEdgeItems - 1;
      continue;
    }
    render(t.select(0, i), f, summarize, indent + 1, os);
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  if (device().is_meta()) {  // PyTorch's "tensor(..., device='meta', size=(2, 3))": no values to infer a dtype from
    const std::string shape =
        dim() == 1 ? fmt::format("({},)", size(0)) : fmt::format("({})", fmt::join(sizes(), ", "));
    return fmt::format("tensor(..., device='meta', size={}{})", shape,
                       dtype() == default_float_dtype() ? "" : fmt::format(", dtype=torch.{}", dtype_name(dtype())));
  }
  const bool default_dtype = dtype() == default_float_dtype() || dtype() == DType::Int64 || dtype() == DType::Bool;
  const Tensor t = device().is_cpu() ? *this : cpu();
  bool floating = is_floating(dtype());
  bool summarize = numel() > kSummarizeAbove;
  std::vector<double> values;
  if (numel() > 0) collect(t, summarize, values);
  Formatter f = make_formatter(values, floating);
  f.boolean = dtype() == DType::Bool;
  if (f.boolean) {  // "True" or "False": as wide as the widest printed ("tensor([ True, False])", "tensor(False)")
    f.width = 1;
    for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
  }
  std::ostringstream os;
  os << "tensor(";
  if (numel() == 0) {
    os << "[]";
  } else {
    render(t, f, summarize, 7, os);
  }
  if (numel() == 0 && dim() > 1) os << ", size=" << "(" << fmt::format("{}", fmt::join(sizes(), ", ")) << ")";
  if (!device().is_cpu()) os << ", device='" << device().str() << "'";
  if (!default_dtype) os << ", dtype=torch." << dtype_name(dtype());
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace trainrun
