#pragma once
// torch.result_type over several operands: tensors with dims decide first,
// then 0-dim tensors, then wrapped numbers, each only by raising the
// category (bool < integer < float), as PyTorch does.
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

DType result_type(const std::vector<Tensor>& operands);

}  // namespace trainrun
