#pragma once
// One generated loop (compile/pointwise_codegen.h) standing for a run of
// pointwise ops in a CapturedGraph: it reads each input element once and
// writes only the values later nodes read, where eager would make a pass
// over memory per op and keep every intermediate.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun::compile {

class DeviceLoop;

struct FusedKernel {
  // inputs: per input, a float32 pointer (a Scalar input: to one float); outputs: float32, `rows * cols` each.
  using Fn = void (*)(const float* const* inputs, float* const* outputs, int64_t rows, int64_t cols);
  // How an input is indexed: element by element as the output (Full), by
  // column (a bias broadcast over rows: the output's trailing dims), by row
  // (a per-row statistic broadcast over columns: layer norm's mean), or one
  // value for all (a number, or a one-element tensor).
  enum class InputKind : uint8_t { Full, Column, Row, Scalar };

  std::string name;  // the generated function's, e.g. "fused_3"
  std::vector<std::string> ops;  // the ops it does, in order
  std::vector<InputKind> inputs;
  std::vector<IntList> output_sizes;
  int64_t rows = 1, cols = 0;
  Fn fn = nullptr;
  std::shared_ptr<void> library;  // the loaded shared object, kept open while the kernel is
  // Where it runs: the CPU (fn), or a device whose backend built `device_loop` (compile/device_loop.h).
  Device device;
  std::shared_ptr<const DeviceLoop> device_loop;

  // A Scalar input's value: a one-element CPU tensor of float32/64, int32/64 or bool.
  static float scalar_value(const Tensor& t);

  // Runs the loop on `in` (contiguous float32 tensors on its device, as
  // recorded; a Scalar input may be a one-element tensor of another dtype,
  // or on the CPU), making the outputs.
  void run(const std::vector<Tensor>& in, std::vector<Tensor>& out) const;
};

}  // namespace trainrun::compile
