#pragma once
// cuBLAS handles (one per device and thread, bound to the current stream at
// each use) and the TF32 switch of float32 matrix products.
struct cublasContext;

namespace trainrun::cuda {

// The calling thread's cuBLAS handle for `device`, set to its current stream.
cublasContext* cublas_handle(int device);
// Whether float32 GEMMs may use TF32 tensor cores (10-bit mantissa inputs,
// float32 accumulation): PyTorch's torch.backends.cuda.matmul.allow_tf32,
// off by default as there.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace trainrun::cuda
