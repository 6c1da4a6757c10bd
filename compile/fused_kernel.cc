#include "compile/fused_kernel.h"

#include <fmt/format.h>

#include "base/error.h"
#include "compile/device_loop.h"
#include "tensor/factories.h"

namespace trainrun::compile {
float FusedKernel::scalar_value(const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float32: return *t.data<float>();
    case DType::Float64: return static_cast<float>(*t.data<double>());
    case DType::Int64: return static_cast<float>(*t.data<int64_t>());
    case DType::Int32: return static_cast<float>(*t.data<int32_t>());
    case DType::Int16: return static_cast<float>(*t.data<int16_t>());
    case DType::Bool: return *t.data<bool>() ? 1.0f : 0.0f;
    default: throw ValueError(fmt::format("fused kernel: a {} scalar input", dtype_name(t.dtype())));
  }
}

void FusedKernel::run(const std::vector<Tensor>& in, std::vector<Tensor>& out) const {
  TR_CHECK(in.size() == inputs.size(), ValueError, "{}: {} inputs given, it takes {}", name, in.size(), inputs.size());
  if (device_loop != nullptr) return device_loop->run(*this, in, out);
  std::vector<float> scalars(in.size());
  std::vector<const float*> in_ptrs(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (inputs[i] == InputKind::Scalar) {
      scalars[i] = scalar_value(in[i]);
      in_ptrs[i] = &scalars[i];
    } else {
      // The recording checked these; a replay's inputs pass the same guards, so this only catches a bug.
      TR_CHECK(in[i].dtype() == DType::Float32 && in[i].is_contiguous(), ValueError,
               "{}: input {} is not a contiguous float32 tensor", name, i);
      in_ptrs[i] = in[i].data<float>();
    }
  }
  out.clear();
  std::vector<float*> out_ptrs;
  for (const IntList& sizes : output_sizes) {
    out.push_back(empty(sizes, TensorOptions(DType::Float32)));
    out_ptrs.push_back(out.back().data<float>());
  }
  fn(in_ptrs.data(), out_ptrs.data(), rows, cols);
}

}  // namespace trainrun::compile
