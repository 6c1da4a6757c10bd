#pragma once
// Dispatch keys: which family of kernels handles a call. A call goes to the
// highest-priority key present on its inputs and not excluded on this thread.
#include <cstdint>

#include "tensor/device.h"

namespace trainrun {

// Priority order: later entries win. Backend keys (where kernels compute)
// come first, up to LastBackend; functionality keys (which wrap a call and
// redispatch below themselves) follow.
enum class DispatchKey : uint8_t {
  CPU = 0,
  CUDA = 1,
  // Meta tensors (no data): kernels that only work out the result's shape
  // and dtype (tensor/meta/). Above the other backends, so an op mixing a
  // meta tensor with real ones computes nothing.
  Meta = 2,
  LastBackend = Meta,
  // A backend kernel written in Python that replaces an op's own for a device
  // (torch.library.Library("aten", "IMPL").impl): on for the ops that have one
  // (OpTable::has_python_kernel), just above the backends, so autograd,
  // tracing and autocast still run above it. Its boxed fallback calls the
  // Python kernel or lets the op go on below.
  PythonKernel = 3,
  // Sees the ops autograd runs, forward and backward: graph capture and debug
  // modes install a boxed fallback for it and switch it on for a thread
  // (IncludeDispatchKeyGuard). No op has a kernel of its own here.
  Tracing = 4,
  Autograd = 5,  // records the graph, then redispatches below itself
  // Mixed precision (tensor/autocast.h): switched on per thread by autocast;
  // casts the inputs of the ops on its lists, then lets them go on below
  // (autograd records the casts, so gradients come back in each input's dtype).
  Autocast = 6,
  NumKeys = 7,
};
constexpr int kNumDispatchKeys = static_cast<int>(DispatchKey::NumKeys);

constexpr bool is_backend_key(DispatchKey k) { return k <= DispatchKey::LastBackend; }
const char* dispatch_key_name(DispatchKey k);
DispatchKey backend_key(Device d);

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(DispatchKey k) : bits_(1u << static_cast<int>(k)) {}
  constexpr DispatchKeySet operator|(DispatchKeySet o) const { return from_bits(bits_ | o.bits_); }
  constexpr DispatchKeySet operator-(DispatchKeySet o) const { return from_bits(bits_ & ~o.bits_); }
  constexpr bool has(DispatchKey k) const { return (bits_ >> static_cast<int>(k)) & 1u; }
  constexpr bool empty() const { return bits_ == 0; }
  // The highest-priority key present; only valid when !empty().
  DispatchKey highest() const { return static_cast<DispatchKey>(31 - __builtin_clz(bits_)); }
  constexpr uint32_t bits() const { return bits_; }

 private:
  static constexpr DispatchKeySet from_bits(uint32_t b) { DispatchKeySet s; s.bits_ = b; return s; }
  uint32_t bits_ = 0;
};

}  // namespace trainrun
