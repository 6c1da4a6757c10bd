#include "tensor/nn_shapes.h"

#include "tensor/autocast.h"

#include <algorithm>

namespace trainrun {
namespace {

// Floor division: a window larger than the padded input gives a negative numerator, whose quotient C++ rounds
// toward zero (one output) where the size is none.
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return floor_div(in + 2 * p - d * (k - 1) - 1, s) + 1;
}

IntList pair_arg(const IntList& v, const char* name, const char* op, int64_t min_value) {
  TR_CHECK(v.size() == 1 || v.size() == 2, ValueError, "{}: {} must have 1 or 2 values, got [{}]", op, name,
           fmt::join(v, ", "));
  IntList r = v.size() == 1 ? IntList{v[0], v[0]} : v;
  TR_CHECK(r[0] >= min_value && r[1] >= min_value, ValueError, "{}: {} must be >= {}, got [{}]", op, name, min_value,
           fmt::join(v, ", "));
  return r;
}

}  // namespace

ConvArgs check_conv_args(const char* op, const Tensor& input, const Tensor& weight, const IntList& stride,
                         const IntList& padding, const IntList& dilation, int64_t groups) {
  TR_CHECK(input.dim() == 3 || input.dim() == 4, ValueError,
           "{}: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {}", op, input.shape_str());
  TR_CHECK(weight.dim() == 4, ValueError, "{}: expected a 4-D weight (C_out, C_in/groups, kH, kW), got shape {}", op,
           weight.shape_str());
  TR_CHECK(groups >= 1, ValueError, "{}: groups must be positive, got {}", op, groups);
  // Under autocast the Autocast kernel casts both to one dtype before any kernel runs.
  TR_CHECK(input.dtype() == weight.dtype() || autocast_enabled_for(input.device()), TypeError,
           "{}: input dtype {} and weight dtype {} differ", op, dtype_name(input.dtype()), dtype_name(weight.dtype()));
  TR_CHECK(is_floating(input.dtype()), TypeError, "{}: expected floating point tensors, got {}", op,
           dtype_name(input.dtype()));
  ConvArgs a;
  a.batched = input.dim() == 4;
  const int64_t lead = a.batched ? 1 : 0;
  a.st = pair_arg(stride, "stride", op, 1);
  a.pad = pair_arg(padding, "padding", op, 0);
  a.dil = pair_arg(dilation, "dilation", op, 1);
  a.N = a.batched ? input.size(0) : 1;
  a.C = input.size(lead), a.H = input.size(lead + 1), a.W = input.size(lead + 2);
  a.O = weight.size(0), a.Cg = weight.size(1), a.kH = weight.size(2), a.kW = weight.size(3);
  a.groups = groups;
  TR_CHECK(a.C == a.Cg * groups, ValueError,
           "{}: input has {} channels but weight of shape {} with groups={} expects {}", op, a.C, weight.shape_str(),
           groups, a.Cg * groups);
  TR_CHECK(a.O % groups == 0, ValueError, "{}: out channels ({}) must be divisible by groups ({})", op, a.O, groups);
  a.Ho = conv_out_size(a.H, a.kH, a.st[0], a.pad[0], a.dil[0]);
  a.Wo = conv_out_size(a.W, a.kW, a.st[1], a.pad[1], a.dil[1]);
  TR_CHECK(a.Ho > 0 && a.Wo > 0, ValueError,
           "{}: kernel {}x{} (dilation {}x{}) is larger than the padded input {}x{}", op, a.kH, a.kW, a.dil[0],
           a.dil[1], a.H + 2 * a.pad[0], a.W + 2 * a.pad[1]);
  return a;
}

int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t numer = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = floor_div(numer, s) + 1;
  // The last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

PoolGeometry pool_geometry(const Tensor& x, const IntList& k, const IntList& s, const IntList& p, const IntList& d,
                           bool ceil_mode, const char* op) {
  TR_CHECK(x.dim() == 3 || x.dim() == 4, ValueError, "{}: expected a 3-D or 4-D input, got shape {}", op, x.shape_str());
  auto pair = [&](const IntList& v, const IntList& dflt, const char* name) {
    IntList r = v.empty() ? dflt : v.size() == 1 ? IntList{v[0], v[0]} : v;
    TR_CHECK(r.size() == 2, ValueError, "{}: {} must have 1 or 2 values, got [{}]", op, name, fmt::join(v, ", "));
    return r;
  };
  IntList kk = pair(k, {}, "kernel_size"), ss = pair(s, kk, "stride"), pp = pair(p, {0, 0}, "padding"),
          dd = pair(d, {1, 1}, "dilation");
  TR_CHECK(kk[0] > 0 && kk[1] > 0 && ss[0] > 0 && ss[1] > 0 && dd[0] > 0 && dd[1] > 0, ValueError,
           "{}: kernel_size, stride and dilation must be positive", op);
  TR_CHECK(pp[0] >= 0 && pp[1] >= 0 && pp[0] * 2 <= kk[0] && pp[1] * 2 <= kk[1], ValueError,
           "{}: padding [{}] must be non-negative and at most half the kernel size [{}]", op, fmt::join(pp, ", "),
           fmt::join(kk, ", "));
  PoolGeometry g;
  g.H = x.size(-2);
  g.W = x.size(-1);
  g.planes = x.numel() / std::max<int64_t>(g.H * g.W, 1);
  g.kH = kk[0]; g.kW = kk[1]; g.sH = ss[0]; g.sW = ss[1]; g.pH = pp[0]; g.pW = pp[1]; g.dH = dd[0]; g.dW = dd[1];
  g.Ho = pool_out_size(g.H, g.kH, g.sH, g.pH, g.dH, ceil_mode);
  g.Wo = pool_out_size(g.W, g.kW, g.sW, g.pW, g.dW, ceil_mode);
  TR_CHECK(g.Ho > 0 && g.Wo > 0, ValueError, "{}: output size is {}x{} for input {}: too small for the kernel", op,
           g.Ho, g.Wo, x.shape_str());
  g.out_shape = IntList(x.sizes().begin(), x.sizes().end() - 2);
  g.out_shape.push_back(g.Ho);
  g.out_shape.push_back(g.Wo);
  return g;
}

NormShape check_norm(const Tensor& x, const IntList& normalized_shape, const Tensor& weight, const Tensor& bias,
                     const char* op) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TR_CHECK(k >= 1, ValueError, "{}: normalized_shape must have at least one dim", op);
  TR_CHECK(x.dim() >= k, ValueError, "{}: input of shape {} has fewer dims than normalized_shape [{}]", op,
           x.shape_str(), fmt::join(normalized_shape, ", "));
  IntList trailing(x.sizes().end() - k, x.sizes().end());
  TR_CHECK(trailing == normalized_shape, ValueError,
           "{}: expected input with trailing shape [{}], got input of shape {}", op, fmt::join(normalized_shape, ", "),
           x.shape_str());
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    TR_CHECK(p->sizes() == normalized_shape, ValueError, "{}: weight/bias of shape {} must have normalized_shape [{}]",
             op, p->shape_str(), fmt::join(normalized_shape, ", "));
  }
  TR_CHECK(is_floating(x.dtype()), TypeError, "{}: expected a floating point input, got {}", op, dtype_name(x.dtype()));
  NormShape s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < x.dim() - k) {
      s.rows *= x.size(d);
      s.stat_shape.push_back(x.size(d));
    } else {
      s.n *= x.size(d);
      s.stat_shape.push_back(1);
    }
  }
  return s;
}

}  // namespace trainrun
