// Tensor printing in PyTorch's format: "tensor([[1.0000, 2.5000], ...])",
// integral floats as "1.", scientific notation for wide ranges, "..." past
// 1000 elements, rows wrapped at 80 columns, and the dtype named when it is
// not a default one.
#include "tensor/print.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "tensor/ops.h"

namespace trainrun {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

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
      if (f.integral_values) f.sci = max_abs / min_abs > 1000.0 || max_abs > 1e8;  // (PyTorch's int_mode rule)
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
  const bool skip = summarize && n > 2 * kEdgeItems;  // print the first and last kEdgeItems, "..." between
  os << "[";
  if (t.dim() == 1) {
    // PyTorch's _vector_str: as many elements per line as fit the width (" ..." takes an element's place).
    const int per_line = std::max(1, (kLineWidth - indent) / (f.width + 2));
    int64_t printed = 0;
    for (int64_t i = 0; i < n; ++i, ++printed) {
      if (printed > 0) os << (printed % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ");
      if (skip && i == kEdgeItems) {
        os << " ...";
        i = n - kEdgeItems - 1;
        continue;
      }
      render(t.select(0, i), f, summarize, indent + 1, os);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0) os << "," << std::string(t.dim() - 1, '\n') << std::string(indent + 1, ' ');
      if (skip && i == kEdgeItems) {
        os << "...";
        i = n - kEdgeItems - 1;
        continue;
      }
      render(t.select(0, i), f, summarize, indent + 1, os);
    }
  }
  os << "]";
}

// PyTorch's _add_suffixes: ", suffix" on the last line while it fits the width, else on a line of its own
// (its count of the last line starts 2 over the line's length; kept, so lines break where PyTorch's do).
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes) {
  const size_t newline = text.rfind('\n');
  size_t last_line = text.size() - (newline == std::string::npos ? 0 : newline + 1) + 2;
  for (const std::string& suffix : suffixes) {
    if (last_line + suffix.size() + 2 > kLineWidth) {
      text += ",\n" + std::string(7, ' ') + suffix;
      last_line = 7 + suffix.size();
    } else {
      text += ", " + suffix;
      last_line += suffix.size() + 2;
    }
  }
  return text + ")";
}

}  // namespace

std::string tensor_repr(const Tensor& self, const std::vector<std::string>& extra_suffixes) {
  if (!self.defined()) return "tensor(undefined)";
  const DType dtype = self.dtype();
  std::vector<std::string> suffixes;
  if (self.device().is_meta()) {  // PyTorch's "tensor(..., device='meta', size=(2, 3))": no values to print
    suffixes.push_back("device='meta'");
    suffixes.push_back(self.dim() == 1 ? fmt::format("size=({},)", self.size(0))
                                       : fmt::format("size=({})", fmt::join(self.sizes(), ", ")));
    if (dtype != default_float_dtype()) suffixes.push_back(std::string("dtype=torch.") + dtype_name(dtype));
    suffixes.insert(suffixes.end(), extra_suffixes.begin(), extra_suffixes.end());
    return add_suffixes("tensor(...", suffixes);
  }
  const bool default_dtype = dtype == default_float_dtype() || dtype == DType::Int64 || dtype == DType::Bool;
  const Tensor t = self.device().is_cpu() ? self : self.cpu();
  const int64_t numel = self.numel();
  bool summarize = numel > kSummarizeAbove;
  std::vector<double> values;
  if (numel > 0) collect(t, summarize, values);
  Formatter f = make_formatter(values, is_floating(dtype));
  f.boolean = dtype == DType::Bool;
  if (f.boolean) {  // "True" or "False": as wide as the widest printed ("tensor([ True, False])", "tensor(False)")
    f.width = 1;
    for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
  }
  std::ostringstream os;
  os << "tensor(";
  if (!self.device().is_cpu()) suffixes.push_back("device='" + self.device().str() + "'");
  if (numel == 0) {  // (no values to tell the dtype by: named unless it is the default float dtype)
    os << "[]";
    if (self.dim() != 1) suffixes.push_back(fmt::format("size=({})", fmt::join(self.sizes(), ", ")));
    if (dtype != default_float_dtype()) suffixes.push_back(std::string("dtype=torch.") + dtype_name(dtype));
  } else {
    render(t, f, summarize, 7, os);
    if (!default_dtype) suffixes.push_back(std::string("dtype=torch.") + dtype_name(dtype));
  }
  suffixes.insert(suffixes.end(), extra_suffixes.begin(), extra_suffixes.end());
  return add_suffixes(os.str(), suffixes);
}

std::string Tensor::str() const { return tensor_repr(*this, {}); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace trainrun
