#pragma once
// One exception hierarchy for all of trainrun. The Python bindings map each
// class to the matching Python exception (ValueError, TypeError, ...).
#include <stdexcept>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace trainrun {

// Base of every error trainrun throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// A value (shape, size, option) is not acceptable.
class ValueError : public Error { using Error::Error; };
// A dtype or device is not acceptable.
class TypeError : public Error { using Error::Error; };
// A dim or index is out of range.
class IndexError : public Error { using Error::Error; };
// No kernel exists for this op/dtype/device combination.
class NotImplementedError : public Error { using Error::Error; };
// A blocking call ran past its deadline.
class TimeoutError : public Error { using Error::Error; };
// A store operation (get, wait, connect, a store barrier) ran past its
// timeout (Python: DistStoreError, and TimeoutError).
class StoreTimeoutError : public TimeoutError { using TimeoutError::TimeoutError; };
// A distributed backend (gloo, nccl, shared memory) failed (Python: DistBackendError).
class DistBackendError : public Error { using Error::Error; };
// The CUDA runtime, driver or a CUDA library reported an error, or no GPU is
// usable (Python: RuntimeError).
class CudaError : public Error { using Error::Error; };
// A device allocation failed even after the allocator returned its cached
// blocks (Python: trainrun.cuda.OutOfMemoryError, a RuntimeError).
class OutOfMemoryError : public Error { using Error::Error; };

}  // namespace trainrun

// TR_CHECK(cond, ErrorClass, "fmt {}", args...): throw ErrorClass with a
// formatted message when cond is false. The message should name the op, the
// shapes and the dim involved.
#define TR_CHECK(cond, ErrorClass, ...)                        \
  do {                                                         \
    if (!(cond)) throw ::trainrun::ErrorClass(fmt::format(__VA_ARGS__)); \
  } while (0)
