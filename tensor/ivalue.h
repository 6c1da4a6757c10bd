#pragma once
// The boxed calling convention: an op's arguments and results as a stack of
// IValues, so that one function can handle every op (a fallback registered
// for a whole dispatch key: graph capture, a debug mode, a distributed key).
// Boxing is derived from each op's C++ signature at compile time; an op
// whose signature holds a type with no IValue (a callback, a struct) is
// "not boxable", and a boxed fallback refuses it by name.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.h"
#include "tensor/tensor.h"

namespace trainrun {

class IValue {
 public:
  using Value = std::variant<std::monostate, Tensor, std::vector<Tensor>, int64_t, double, bool, IntList, std::string,
                             DType, Device, Scalar>;
  IValue() = default;
  template <typename T, typename = std::enable_if_t<std::is_constructible<Value, T&&>::value>>
  IValue(T&& v) : value_(std::forward<T>(v)) {}  // NOLINT: boxing is implicit

  bool is_none() const { return std::holds_alternative<std::monostate>(value_); }
  bool is_tensor() const { return std::holds_alternative<Tensor>(value_); }
  bool is_tensor_list() const { return std::holds_alternative<std::vector<Tensor>>(value_); }
  // The held value as T; TypeError naming both types when it holds another.
  template <typename T>
  T& get() {
    T* v = std::get_if<T>(&value_);
    TR_CHECK(v != nullptr, TypeError, "IValue holds a {}, not the {} asked for", type_name(), name_of<T>());
    return *v;
  }
  // "Tensor", "int", "float", "int[]", "None", ...: for traces and messages.
  const char* type_name() const;

 private:
  template <typename T>
  static const char* name_of() {
    return IValue(T()).type_name();
  }
  Value value_;
};

using Stack = std::vector<IValue>;

// How one C++ argument or result type is boxed: Boxing<T>::boxable, box(v)
// and unbox(IValue&) (returning what a kernel parameter of type T binds to).
template <typename T, typename = void>
struct Boxing {
  static constexpr bool boxable = false;
};

template <typename T>
struct Boxing<T, std::enable_if_t<std::is_same<T, Tensor>::value || std::is_same<T, std::vector<Tensor>>::value ||
                                  std::is_same<T, int64_t>::value || std::is_same<T, double>::value ||
                                  std::is_same<T, bool>::value || std::is_same<T, std::string>::value ||
                                  std::is_same<T, DType>::value || std::is_same<T, Device>::value ||
                                  std::is_same<T, Scalar>::value>> {
  static constexpr bool boxable = true;
  static IValue box(const T& v) { return IValue(T(v)); }
  static T unbox(IValue& v) { return v.get<T>(); }
};

// IntList is std::vector<int64_t>.
template <>
struct Boxing<IntList> {
  static constexpr bool boxable = true;
  static IValue box(const IntList& v) { return IValue(IntList(v)); }
  static IntList unbox(IValue& v) { return v.get<IntList>(); }
};

// Narrower integers and float travel as int64 and double.
template <typename T>
struct Boxing<T, std::enable_if_t<(std::is_integral<T>::value && !std::is_same<T, bool>::value &&
                                   !std::is_same<T, int64_t>::value) ||
                                  std::is_same<T, float>::value>> {
  static constexpr bool boxable = true;
  using Wide = std::conditional_t<std::is_same<T, float>::value, double, int64_t>;
  static IValue box(T v) { return IValue(static_cast<Wide>(v)); }
  static T unbox(IValue& v) { return static_cast<T>(v.get<Wide>()); }
};

// An optional is None or its value.
template <typename T>
struct Boxing<std::optional<T>, std::enable_if_t<Boxing<T>::boxable>> {
  static constexpr bool boxable = true;
  static IValue box(const std::optional<T>& v) { return v ? Boxing<T>::box(*v) : IValue(); }
  static std::optional<T> unbox(IValue& v) {
    if (v.is_none()) return std::nullopt;
    return Boxing<T>::unbox(v);
  }
};

template <typename T>
using BoxingOf = Boxing<std::remove_cv_t<std::remove_reference_t<T>>>;

template <typename... Args>
constexpr bool all_boxable = (BoxingOf<Args>::boxable && ...);

// Results: nothing, one boxable value, or a tuple of them (one stack entry each).
template <typename R>
struct ResultBoxing {
  static constexpr bool boxable = BoxingOf<R>::boxable;
  static void box(Stack& s, const R& r) { s.push_back(BoxingOf<R>::box(r)); }
  static std::remove_cv_t<std::remove_reference_t<R>> unbox(Stack& s) {
    TR_CHECK(s.size() == 1, ValueError, "a boxed kernel left {} values, 1 expected", s.size());
    return BoxingOf<R>::unbox(s[0]);
  }
};
template <>
struct ResultBoxing<void> {
  static constexpr bool boxable = true;
};
template <typename... Ts>
struct ResultBoxing<std::tuple<Ts...>> {
  static constexpr bool boxable = all_boxable<Ts...>;
  static void box(Stack& s, const std::tuple<Ts...>& r) {
    std::apply([&](const auto&... v) { (s.push_back(BoxingOf<decltype(v)>::box(v)), ...); }, r);
  }
  static std::tuple<Ts...> unbox(Stack& s) {
    TR_CHECK(s.size() == sizeof...(Ts), ValueError, "a boxed kernel left {} values, {} expected", s.size(),
             sizeof...(Ts));
    return unbox_each(s, std::index_sequence_for<Ts...>());
  }

 private:
  template <size_t... I>
  static std::tuple<Ts...> unbox_each(Stack& s, std::index_sequence<I...>) {
    return std::tuple<Ts...>(Boxing<Ts>::unbox(s[I])...);
  }
};

template <typename... Args, size_t... I>
std::tuple<std::remove_cv_t<std::remove_reference_t<Args>>...> unbox_arguments(Stack& stack,
                                                                               std::index_sequence<I...>) {
  return std::tuple<std::remove_cv_t<std::remove_reference_t<Args>>...>(BoxingOf<Args>::unbox(stack[I])...);
}

// Calls fn with the arguments unboxed from `stack` (which then holds the
// results), for a signature R(Args...). Only for boxable signatures.
template <typename R, typename... Args, typename Fn>
void call_unboxed(Stack& stack, Fn&& fn) {
  TR_CHECK(stack.size() == sizeof...(Args), ValueError, "a boxed call passed {} arguments, the op takes {}",
           stack.size(), sizeof...(Args));
  // Owned copies of every argument: a Tensor& parameter binds to the copy,
  // which shares the caller's TensorImpl (in-place ops still act on it).
  auto values = unbox_arguments<Args...>(stack, std::index_sequence_for<Args...>());
  stack.clear();
  if constexpr (std::is_void<R>::value) {
    std::apply(fn, values);
  } else {
    ResultBoxing<std::remove_cv_t<std::remove_reference_t<R>>>::box(stack, std::apply(fn, values));
  }
}

}  // namespace trainrun
