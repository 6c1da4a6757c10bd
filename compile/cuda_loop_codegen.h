#pragma once
// CUDA C++ for fused loops (compile/pointwise_codegen.h's plans), compiled
// at run time by NVRTC (compile/cuda/). Each op computes as the eager CUDA
// kernel does (tensor/elementwise_math.h), one element per thread.
//
// A plan without reductions is one flat kernel: a grid-stride loop over
// rows x cols. A plan with reductions walks rows: a block per row (blocks
// stride over rows), its threads over the row's columns, once per phase; a
// row reduction ends its phase with a block-wide reduction every thread
// reads. Values a later phase reads stay in a row-sized slice of `work`
// per block (each thread reads back only what it wrote). A column sum adds
// into a per-block partial row in `work`, which a second kernel,
// `<name>_columns`, sums over the blocks in order (deterministic, no atomics).
//
// Kernel parameters: `<name>(in0, ..., out0, ..., float* work, long long
// rows, long long cols)` (an input: a const float* on the device, or a
// float by value where the plan's host_scalar says it is a number on the
// CPU) and `<name>_columns(const float* work, the column sums' outputs, in
// order, long long rows, long long cols, int blocks)`.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compile/pointwise_codegen.h"

namespace trainrun::compile {

// How a plan's kernels are launched.
struct CudaLoopShape {
  bool by_row = false;     // a block per row (the plan reduces); else flat
  size_t scratch = 0;      // row-sized slices of work per block for values a later phase reads
  size_t column_sums = 0;  // row-sized partials of work per block, one per column sum; then <name>_columns runs
  std::vector<size_t> column_sum_outputs;  // per column sum, in order: the index of its output
  std::vector<char> host_scalar;           // per input: passed by value (LoopPlan::host_scalar)
  // Floats of `work` for `blocks` blocks over rows of `cols`.
  size_t work_floats(size_t blocks, size_t cols) const { return (scratch + column_sums) * blocks * cols; }
};

CudaLoopShape cuda_loop_shape(const LoopPlan& plan);
// Whether a CUDA loop suits the plan over rows x cols. A row reduction takes one block per row: with fewer rows
// than a GPU has multiprocessors and long rows (a mean of everything is one row), the eager reduction, split
// over many blocks, is faster, so the loop is not made.
bool cuda_loop_fits(const LoopPlan& plan, int64_t rows, int64_t cols);
// The kernels of one plan.
std::string cuda_loop_source(const std::string& name, const LoopPlan& plan);
// What every generated CUDA file starts with (device helpers: block reductions, ops with several steps).
std::string cuda_loops_prelude();

}  // namespace trainrun::compile
