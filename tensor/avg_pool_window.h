#pragma once
// The input an avg_pool2d window covers and what its sum is divided by,
// shared by the CPU kernels (cpu/pool_kernels.cc) and the CUDA ones
// (cuda/kernels/conv_pool_elements.h).
#include <cstdint>

#include "tensor/host_device.h"

namespace trainrun {

// Input rows [h0, h1) and columns [w0, w1), and PyTorch's divisor: the
// window clipped to the padded input (count_include_pad) or to the input.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

// Output (oh, ow)'s window; Geometry has H, W, kH, kW, sH, sW, pH, pW (the
// CPU's PoolGeometry and the kernels' PoolArgs both do).
template <typename Geometry>
TR_HOST_DEVICE inline AvgWindow avg_window(const Geometry& g, int64_t oh, int64_t ow, bool count_include_pad) {
  int64_t h0 = oh * g.sH - g.pH, w0 = ow * g.sW - g.pW;
  int64_t h1 = h0 + g.kH < g.H + g.pH ? h0 + g.kH : g.H + g.pH;
  int64_t w1 = w0 + g.kW < g.W + g.pW ? w0 + g.kW : g.W + g.pW;
  const int64_t padded_count = (h1 - h0) * (w1 - w0);
  h0 = h0 > 0 ? h0 : 0;
  w0 = w0 > 0 ? w0 : 0;
  h1 = h1 < g.H ? h1 : g.H;
  w1 = w1 < g.W ? w1 : g.W;
  const int64_t count = count_include_pad ? padded_count : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, count > 1 ? count : 1};
}

}  // namespace trainrun
