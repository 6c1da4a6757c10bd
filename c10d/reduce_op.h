#pragma once
// torch.distributed.ReduceOp: how a collective combines the ranks' values.
#include <cstddef>
#include <functional>
#include <string>

#include "tensor/dtype.h"

namespace trainrun {
namespace c10d {

struct ReduceOp {
  enum Kind { SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM };
  Kind kind = SUM;
  double factor = 1.0;  // PREMUL_SUM: each rank's input is scaled by this first

  ReduceOp() = default;
  ReduceOp(Kind k) : kind(k) {}  // NOLINT: lets callers write ReduceOp::MAX
  static ReduceOp premul_sum(double factor) {
    ReduceOp op(PREMUL_SUM);
    op.factor = factor;
    return op;
  }
  std::string name() const;
};

// out[i] = a[i] (op) b[i] for n elements of dtype; out may alias a or b.
// SUM, AVG (summed here, divided after) and PREMUL_SUM (inputs scaled
// before) add; f16 and bf16 are combined in float32 and rounded once per
// step. Throws TypeError naming the op and dtype when they do not mix (a
// bitwise op on floats).
using ReduceFn = std::function<void(void* out, const void* a, const void* b, size_t n)>;
ReduceFn reduce_function(ReduceOp op, DType dtype);

}  // namespace c10d
}  // namespace trainrun
