#pragma once
// The one dispatcher: ops are named ("add", "matmul", "my_ext::fused_gelu"),
// kernels register per dispatch key, and a call goes to the kernel of the
// highest key present on its inputs (or switched on for the thread) that the
// thread does not exclude. When that key has no kernel for the op:
//   - a composite kernel, if the op has one, runs instead: it decomposes
//     above every key, its parts dispatching again (autograd, tracing and
//     the backends all see the parts);
//   - a backend key takes the op's device-generic kernel (views), else fails;
//   - Autograd lets the op run below it (the missing-formula hook decides
//     whether that is an error);
//   - any other key follows its fallback: fall through to the next key, call
//     one boxed kernel that handles every op (ivalue.h), or fail by name.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tensor/dispatch_key.h"
#include "tensor/dtype.h"
#include "tensor/ivalue.h"
#include "tensor/record_function.h"

namespace trainrun {

class OpTable;

// A kernel for every op at one key, in the boxed convention: it reads the
// op's arguments from `stack` and leaves its results there; to let the op go
// on below its key it calls op.redispatch_boxed(key, keys, stack).
using BoxedKernel = std::function<void(const OpTable& op, DispatchKey key, DispatchKeySet keys, Stack& stack)>;

// What a functionality key does with an op that has no kernel for it.
struct KeyFallback {
  enum Kind { Fallthrough, Boxed, Error };
  Kind kind = Fallthrough;
  BoxedKernel kernel;  // for Boxed
  // Boxed: an op whose signature has no boxed form falls through instead of
  // failing (for keys that only care about some ops, like Autocast).
  bool unboxable_falls_through = false;
  // Called for each op that falls through that way (graph capture notes that
  // its program is incomplete).
  std::function<void(const OpTable&)> on_unboxable_fallthrough;
};

// The kernel table of one op.
class OpTable {
 public:
  OpTable(std::string name, std::type_index signature) : name_(std::move(name)), signature_(signature) {}
  const std::string& name() const { return name_; }
  std::type_index signature() const { return signature_; }
  void* kernel(int slot) const { return kernels_[slot]; }
  void set_kernel(int slot, void* fn);
  // Device-generic kernel: what a backend key without its own kernel runs.
  static constexpr int kGenericSlot = kNumDispatchKeys;
  // Composite kernel: runs at any key without its own kernel, decomposing the op.
  static constexpr int kCompositeSlot = kNumDispatchKeys + 1;

  // Whether the op's signature has a boxed form (every argument and result type has an IValue).
  bool boxable() const { return static_cast<bool>(boxed_); }
  // Calls the op with arguments from `stack` (results left there), dispatching on `keys` as a typed call would.
  void call_boxed(DispatchKeySet keys, Stack& stack) const;
  // Calls the op below `key` (excluded on this thread meanwhile): how a boxed fallback lets the op go on.
  void redispatch_boxed(DispatchKey key, DispatchKeySet keys, Stack& stack) const;
  // Set once, by the first typed handle of a boxable signature.
  void set_boxed(std::function<void(DispatchKeySet, Stack&)> boxed);
  // Whether calls pass the PythonKernel key (some device's kernel is replaced from Python).
  bool has_python_kernel() const { return python_kernel_.load(std::memory_order_relaxed); }
  void set_python_kernel(bool on) { python_kernel_.store(on, std::memory_order_relaxed); }

 private:
  std::string name_;
  std::type_index signature_;
  std::atomic<bool> python_kernel_{false};
  void* kernels_[kNumDispatchKeys + 2] = {};
  std::once_flag boxed_once_;
  std::function<void(DispatchKeySet, Stack&)> boxed_;
};

class Dispatcher {
 public:
  static Dispatcher& get();
  // The table for `name`; created on first use. Throws TypeError when the op
  // exists with another signature.
  OpTable& table(const std::string& name, std::type_index signature);
  // The table for `name`, or nullptr when no kernel or call site has named it.
  const OpTable* find(const std::string& name);
  [[noreturn]] static void throw_no_kernel(const OpTable& t, DispatchKeySet keys);
  // Names of the ops registered so far, sorted; `missing` keeps only those
  // without a kernel for that key (tests use it to find ops that lack a
  // backward formula).
  std::vector<std::string> op_names(std::optional<DispatchKey> missing = std::nullopt);
  // Ops that `key` cannot run: no kernel for it and no device-generic one,
  // though some other backend has one (the CUDA coverage test uses it).
  std::vector<std::string> ops_unsupported_on(DispatchKey key);

  // The fallback of a functionality key other than Autograd (whose rule is
  // fixed); ValueError for backend keys and Autograd. Default: Fallthrough.
  void set_fallback(DispatchKey key, KeyFallback fallback);
  std::shared_ptr<const KeyFallback> fallback(DispatchKey key) const {
    return std::atomic_load(&fallbacks_[static_cast<int>(key)]);
  }

 private:
  Dispatcher();
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<OpTable>> tables_;
  std::shared_ptr<const KeyFallback> fallbacks_[kNumDispatchKeys];
};

// Keys excluded on this thread: an autograd kernel excludes Autograd while it
// redispatches to the backend kernel.
DispatchKeySet& tls_excluded_keys();
// Keys switched on for every call of this thread (a tracing mode).
DispatchKeySet& tls_included_keys();

class IncludeDispatchKeyGuard {
 public:
  explicit IncludeDispatchKeyGuard(DispatchKey k) : saved_(tls_included_keys()) {
    tls_included_keys() = saved_ | DispatchKeySet(k);
  }
  ~IncludeDispatchKeyGuard() { tls_included_keys() = saved_; }
  IncludeDispatchKeyGuard(const IncludeDispatchKeyGuard&) = delete;
  IncludeDispatchKeyGuard& operator=(const IncludeDispatchKeyGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

class ExcludeDispatchKeyGuard {
 public:
  explicit ExcludeDispatchKeyGuard(DispatchKey k) : saved_(tls_excluded_keys()) {
    tls_excluded_keys() = saved_ | DispatchKeySet(k);
  }
  ~ExcludeDispatchKeyGuard() { tls_excluded_keys() = saved_; }
  ExcludeDispatchKeyGuard(const ExcludeDispatchKeyGuard&) = delete;
  ExcludeDispatchKeyGuard& operator=(const ExcludeDispatchKeyGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

// Called when an op that has no autograd kernel runs on inputs that are part
// of a graph; `floating_result` says whether its result could carry a
// gradient. Set by autograd/ (tensor/ knows nothing of grad mode); may throw.
using MissingFormulaHook = void (*)(const std::string& op, bool floating_result);
MissingFormulaHook& missing_formula_hook();

// True for result types with a dtype() (a Tensor returned by value).
template <typename T, typename = void>
struct has_dtype_method : std::false_type {};
template <typename T>
struct has_dtype_method<T, std::void_t<decltype(std::declval<const T&>().dtype())>> : std::true_type {};

// The tensor argument an in-place or out= op returns (the first Tensor&).
inline void note_mutable_tensor(Tensor*& found, Tensor& t) {
  if (found == nullptr) found = &t;
}
template <typename T>
void note_mutable_tensor(Tensor*&, const T&) {}

// A typed handle on one op's table; cheap to call, meant to be a function-
// local static at the call site.
template <typename Sig> class Op;
template <typename R, typename... Args>
class Op<R(Args...)> {
  using Result = std::remove_cv_t<std::remove_reference_t<R>>;
  static constexpr bool kBoxable =
      all_boxable<Args...> && (std::is_void<R>::value || ResultBoxing<Result>::boxable);

 public:
  using Fn = R (*)(Args...);
  explicit Op(const std::string& name) : table_(&Dispatcher::get().table(name, typeid(R(Args...)))) {
    if constexpr (kBoxable) {
      OpTable* table = table_;
      table_->set_boxed([table](DispatchKeySet keys, Stack& stack) {
        call_unboxed<R, Args...>(stack, [&](auto&... a) -> decltype(auto) { return Op(table).call(keys, a...); });
      });
    }
  }

  R call(DispatchKeySet keys, Args... args) const {
    if (profiling::active()) [[unlikely]] {  // one event per call (tensor/record_function.h)
      profiling::OpRange range(*table_, args...);
      return dispatch(keys, std::forward<Args>(args)...);
    }
    return dispatch(keys, std::forward<Args>(args)...);
  }
  void register_kernel(int slot, Fn fn) const { table_->set_kernel(slot, reinterpret_cast<void*>(fn)); }
  const OpTable& table() const { return *table_; }

 private:
  explicit Op(OpTable* table) : table_(table) {}

  R dispatch(DispatchKeySet keys, Args... args) const {
    DispatchKeySet live = keys | tls_included_keys();
    if (table_->has_python_kernel()) [[unlikely]] live = live | DispatchKeySet(DispatchKey::PythonKernel);
    live = live - tls_excluded_keys();
    while (!live.empty()) {
      const DispatchKey key = live.highest();
      if (void* fn = table_->kernel(static_cast<int>(key))) return reinterpret_cast<Fn>(fn)(std::forward<Args>(args)...);
      if (void* fn = table_->kernel(OpTable::kCompositeSlot))
        return reinterpret_cast<Fn>(fn)(std::forward<Args>(args)...);
      if (is_backend_key(key)) {
        if (void* fn = table_->kernel(OpTable::kGenericSlot))
          return reinterpret_cast<Fn>(fn)(std::forward<Args>(args)...);
        Dispatcher::throw_no_kernel(*table_, live);
      }
      if (key == DispatchKey::Autograd) return run_without_formula(keys, std::forward<Args>(args)...);
      const std::shared_ptr<const KeyFallback> fallback = Dispatcher::get().fallback(key);
      if (fallback->kind == KeyFallback::Boxed && (kBoxable || !fallback->unboxable_falls_through))
        return call_boxed_fallback(*fallback, key, keys, args...);
      if (fallback->kind == KeyFallback::Error) Dispatcher::throw_no_kernel(*table_, DispatchKeySet(key));
      if (fallback->kind == KeyFallback::Boxed && fallback->on_unboxable_fallthrough)
        fallback->on_unboxable_fallthrough(*table_);
      // (Boxed for an unboxable op that may fall through, or Fallthrough.)
      live = live - DispatchKeySet(key);  // fall through to the next key
    }
    Dispatcher::throw_no_kernel(*table_, live);
  }

  // No gradient formula registered: autograd decides whether that is an
  // error (grad mode on and a floating result), then the op runs below it.
  R run_without_formula(DispatchKeySet keys, Args... args) const {
    MissingFormulaHook hook = missing_formula_hook();
    if constexpr (!std::is_reference<R>::value && has_dtype_method<R>::value) {
      R result = [&] {
        ExcludeDispatchKeyGuard g(DispatchKey::Autograd);
        return call(keys, std::forward<Args>(args)...);
      }();
      if (hook != nullptr) hook(table_->name(), is_floating(result.dtype()));
      return result;
    } else {
      if (hook != nullptr) hook(table_->name(), true);
      ExcludeDispatchKeyGuard g(DispatchKey::Autograd);
      return call(keys, std::forward<Args>(args)...);
    }
  }

  R call_boxed_fallback(const KeyFallback& fallback, DispatchKey key, DispatchKeySet keys, Args&... args) const {
    if constexpr (kBoxable) {
      Stack stack;
      stack.reserve(sizeof...(Args));
      (stack.push_back(BoxingOf<Args>::box(args)), ...);
      fallback.kernel(*table_, key, keys, stack);
      if constexpr (std::is_void<R>::value) {
        return;
      } else if constexpr (std::is_reference<R>::value) {
        Tensor* target = nullptr;  // in-place and out= ops return their target
        (note_mutable_tensor(target, args), ...);
        TR_CHECK(target != nullptr, NotImplementedError, "op '{}' returns a reference but takes no Tensor& to return",
                 table_->name());
        return *target;
      } else {
        return ResultBoxing<Result>::unbox(stack);
      }
    } else {
      throw NotImplementedError(fmt::format(
          "op '{}' cannot be handled by dispatch key {}: its signature has a type with no boxed form", table_->name(),
          dispatch_key_name(key)));
    }
  }

  OpTable* table_;
};

// Registers fn as the kernel of an op of the list (tensor/ops.yaml) for
// `key` at static-initialisation time; the op's name and signature come from
// its generated struct (tensor/op_schemas.h), so a kernel with another
// signature does not compile:
//   static OpKernel<ops::add> reg(DispatchKey::CPU, &add_cpu);
template <typename OpDef>
struct OpKernel {
  OpKernel(DispatchKey key, typename OpDef::Sig* fn) { OpDef::handle().register_kernel(static_cast<int>(key), fn); }
  // Device-generic kernel (used when the backend key has none).
  explicit OpKernel(typename OpDef::Sig* fn) { OpDef::handle().register_kernel(OpTable::kGenericSlot, fn); }
};

// The same for an op outside the list (an extension's "my_ext::fused_gelu",
// a test's), named and typed at the registration:
//   static KernelRegistration<Sig> reg("my_ext::fused_gelu", DispatchKey::CPU, &fused_gelu_cpu);
template <typename Sig>
struct KernelRegistration {
  KernelRegistration(const char* name, DispatchKey key, Sig* fn) {
    Op<Sig>(name).register_kernel(static_cast<int>(key), fn);
  }
  // Device-generic kernel (used when the backend key has none).
  KernelRegistration(const char* name, Sig* fn) { Op<Sig>(name).register_kernel(OpTable::kGenericSlot, fn); }
};

// Registers fn as op `name`'s composite kernel: written with other ops, it
// runs at every key without a kernel of its own, so autograd, tracing and
// the backends see its parts (no backward formula needed):
//   static CompositeRegistration<Tensor(const Tensor&)> reg("softplus", &softplus_composite);
template <typename Sig>
struct CompositeRegistration {
  CompositeRegistration(const char* name, Sig* fn) { Op<Sig>(name).register_kernel(OpTable::kCompositeSlot, fn); }
};

}  // namespace trainrun

// Calls op `name`, outside the list, with signature Sig through the
// dispatcher (an op of the list is called as ops::<name>::call(keys, ...)):
//   return TR_DISPATCH("add", Tensor(const Tensor&, const Tensor&), keys_of(a, b), a, b);
#define TR_DISPATCH(name, Sig, keys, ...)                  \
  ([&]() -> decltype(auto) {                               \
    static const ::trainrun::Op<Sig> tr_op_(name);         \
    return tr_op_.call(keys, __VA_ARGS__);                 \
  }())
