#pragma once
// Python arguments of the bindings generated from the op list
// (python/csrc/op_bindings_generated.cc), converted one by one so that a wrong
// argument raises PyTorch's TypeError, naming the function, the argument and
// what it takes ("add(): argument 'other' (position 2) must be Tensor or a
// number, not str"), instead of a binding-library dump.
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "python/csrc/bindings.h"
#include "tensor/factories.h"

namespace trainrun {
namespace python {

// Releasing the GIL costs more than a tiny op takes: ops release it only
// when their tensor is large enough for another Python thread to gain.
constexpr int64_t kReleaseGilNumel = 1 << 15;
using MaybeReleaseGil = std::optional<py::gil_scoped_release>;
inline void release_if_large(MaybeReleaseGil& guard, const Tensor& t) {
  if (t.numel() >= kReleaseGilNumel) guard.emplace();
}

[[noreturn]] inline void throw_argument_error(const char* fn, const char* arg, int position, const char* expected,
                                              py::handle got) {
  const std::string type = py::str(py::type::of(got).attr("__name__"));
  if (position > 0)
    throw TypeError(
        fmt::format("{}(): argument '{}' (position {}) must be {}, not {}", fn, arg, position, expected, type));
  throw TypeError(fmt::format("{}(): argument '{}' must be {}, not {}", fn, arg, expected, type));
}

inline bool is_number(py::handle h) {
  if (py::isinstance<py::bool_>(h) || py::isinstance<py::int_>(h) || py::isinstance<py::float_>(h)) return true;
  // NumPy scalars (np.float32(2)): 0-d, with a dtype.
  return py::hasattr(h, "dtype") && py::hasattr(h, "item") && !py::isinstance<py::sequence>(h) &&
         py::len(h.attr("shape")) == 0;
}

inline Tensor& tensor_arg(py::handle h, const char* fn, const char* arg, int position) {
  py::detail::make_caster<Tensor> caster;  // one type check and load, not an isinstance and a cast
  if (!caster.load(h, /*convert=*/false)) throw_argument_error(fn, arg, position, "Tensor", h);
  return py::detail::cast_op<Tensor&>(caster);
}

// A number becomes a "wrapped number" 0-dim tensor, which promotes as a
// Python scalar does (int8 tensor + 1 stays int8).
inline Tensor wrapped_number(py::handle number) {
  const Scalar s = to_scalar(number);
  Tensor w = scalar_tensor(s, s.dtype());
  w.impl()->set_wrapped_number(true);
  return w;
}

// A tensor operand after the first: a Tensor or a number.
inline Tensor operand_arg(py::handle h, const char* fn, const char* arg, int position) {
  py::detail::make_caster<Tensor> caster;
  if (caster.load(h, /*convert=*/false)) return py::detail::cast_op<Tensor&>(caster);
  if (is_number(h)) return wrapped_number(h);
  throw_argument_error(fn, arg, position, "Tensor or a number", h);
}

// A number, or a 0-dim tensor standing for its value (as PyTorch's parser takes alpha=torch.tensor(3)).
inline Scalar scalar_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (is_number(h)) return to_scalar(h);
  py::detail::make_caster<Tensor> caster;
  if (caster.load(h, /*convert=*/false) && py::detail::cast_op<Tensor&>(caster).dim() == 0) return to_scalar(h);
  throw_argument_error(fn, arg, position, "a number", h);
}

inline std::optional<Scalar> optional_scalar_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (h.is_none()) return std::nullopt;
  return scalar_arg(h, fn, arg, position);
}

inline std::string string_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (!py::isinstance<py::str>(h)) throw_argument_error(fn, arg, position, "str", h);
  return h.cast<std::string>();
}

// Tensor? (not out=): None is the undefined tensor.
inline Tensor optional_tensor_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (h.is_none()) return Tensor();
  return tensor_arg(h, fn, arg, position);
}

inline bool is_integer(py::handle h) {
  if (py::isinstance<py::bool_>(h)) return false;
  return py::isinstance<py::int_>(h) || (py::hasattr(h, "__index__") && !py::isinstance<Tensor>(h));
}

inline int64_t int_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (!is_integer(h)) throw_argument_error(fn, arg, position, "int", h);
  return py::reinterpret_borrow<py::object>(h).attr("__index__")().cast<int64_t>();
}

inline std::optional<int64_t> optional_int_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (h.is_none()) return std::nullopt;
  return int_arg(h, fn, arg, position);
}

// int[]: one int, or a tuple/list (a trainrun.Size) of them; None is the empty list (every dim, for a reduction).
inline IntList int_list_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (h.is_none()) return {};
  if (is_integer(h)) return {int_arg(h, fn, arg, position)};
  if (!py::isinstance<py::tuple>(h) && !py::isinstance<py::list>(h))
    throw_argument_error(fn, arg, position, "tuple of ints", h);
  IntList out;
  for (py::handle item : h) {
    if (!is_integer(item)) throw_argument_error(fn, arg, position, "tuple of ints", h);
    out.push_back(int_arg(item, fn, arg, position));
  }
  return out;
}

inline bool bool_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (!py::isinstance<py::bool_>(h) && !is_integer(h)) throw_argument_error(fn, arg, position, "bool", h);
  return py::reinterpret_borrow<py::object>(h).cast<bool>();
}

inline double float_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (!is_number(h) || py::isinstance<py::bool_>(h)) throw_argument_error(fn, arg, position, "float", h);
  return py::reinterpret_borrow<py::object>(h).attr("__float__")().cast<double>();
}

inline std::optional<DType> optional_dtype_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (h.is_none()) return std::nullopt;
  if (!py::isinstance<DType>(h)) throw_argument_error(fn, arg, position, "trainrun.dtype", h);
  return h.cast<DType>();
}

inline std::vector<Tensor> tensor_list_arg(py::handle h, const char* fn, const char* arg, int position) {
  if (!py::isinstance<py::tuple>(h) && !py::isinstance<py::list>(h))
    throw_argument_error(fn, arg, position, "tuple of Tensors", h);
  std::vector<Tensor> out;
  for (py::handle item : h) {
    if (!py::isinstance<Tensor>(item)) throw_argument_error(fn, arg, position, "tuple of Tensors", h);
    out.push_back(item.cast<const Tensor&>());
  }
  return out;
}

}  // namespace python
}  // namespace trainrun
