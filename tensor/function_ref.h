#pragma once
// A non-owning reference to a callable: as cheap to pass as a function
// pointer, so hot loops can take lambdas without std::function's allocation.
#include <type_traits>
#include <utility>

namespace trainrun {

template <typename Sig> class FunctionRef;
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, std::enable_if_t<!std::is_same<std::decay_t<F>, FunctionRef>::value, int> = 0>
  FunctionRef(F&& f)  // NOLINT: implicit from any callable
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(a)...); }) {}
  R operator()(Args... a) const { return call_(obj_, std::forward<Args>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace trainrun
