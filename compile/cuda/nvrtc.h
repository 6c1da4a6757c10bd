#pragma once
// NVRTC, the CUDA C++ compiler library, opened at run time (dlopen of
// libnvrtc.so.13, else libnvrtc.so, else under $CUDA_HOME or
// /usr/local/cuda): binaries load on machines without it, and fused CUDA
// loops then replay unfused, the reason in the compiled call's explain().
// NVRTC needs no GPU: sources compile on any machine that has the library.
#include <string>

namespace trainrun::compile::cuda {

// Whether NVRTC could be opened; when not, why (the paths tried and dlopen's message).
bool nvrtc_available(std::string* reason = nullptr);
// "major.minor" of the NVRTC opened; throws ValueError when none could be.
std::string nvrtc_version();
// Compiles CUDA C++ `source` to a CUBIN for `arch` ("sm_90"). Throws ValueError naming `what` with NVRTC's log
// when the source does not compile.
std::string nvrtc_compile(const std::string& source, const std::string& arch, const std::string& what);

}  // namespace trainrun::compile::cuda
