#pragma once
// How each elementwise op sets up its TensorIterator (its name in errors,
// integer-to-float promotion, a bool result), shared by the op's CPU, CUDA
// and meta kernels so that every device promotes and names it the same way.
#include "tensor/elementwise_math.h"
#include "tensor/tensor_iterator.h"

namespace trainrun {

const char* op_name(BinaryOp op);
const char* op_name(UnaryOp op);
IteratorConfig binary_config(BinaryOp op);
IteratorConfig unary_config(UnaryOp op);
// add and sub (a + alpha * b) and clamp: no promotion beyond the inputs'.
IteratorConfig plain_config(const char* op);
// where(cond, a, b): the condition keeps its dtype.
IteratorConfig where_config();
// addcmul / addcdiv (addcdiv divides, so integers compute in float).
IteratorConfig addc_config(bool divide);

}  // namespace trainrun
