// Tensor printing (PyTorch's repr); Tensor::str() is tensor_repr with no extra suffixes.
#pragma once

#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun {

// "tensor([...], dtype=torch.float64, <extra_suffixes>)": the suffixes after the values (the Python layer's
// "grad_fn=<MulBackward0>", "requires_grad=True") wrap to a new line where PyTorch's do.
std::string tensor_repr(const Tensor& self, const std::vector<std::string>& extra_suffixes);

}  // namespace trainrun
