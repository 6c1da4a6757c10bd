#pragma once
// The one dispatcher: ops are named ("add", "matmul", "my_ext::fused_gelu"),
// kernels register per dispatch key, and a call goes to the kernel of the
// highest key present on its inputs that this thread does not exclude. A
// backend key without its own kernel falls back to the op's device-generic
// kernel (views, composite ops), registered under kGenericKernel.
#include <mutex>
#include <optional>
#include <vector>
#include <string>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <unordered_map>

#include "base/error.h"
#include "tensor/dispatch_key.h"
#include "tensor/dtype.h"

namespace trainrun {

// The kernel table of one op.
class OpTable {
 public:
  OpTable(std::string name, std::type_index signature) : name_(std::move(name)), signature_(signature) {}
  const std::string& name() const { return name_; }
  std::type_index signature() const { return signature_; }
  void* kernel(int slot) const { return kernels_[slot]; }
  void set_kernel(int slot, void* fn);
  static constexpr int kGenericSlot = kNumDispatchKeys;

 private:
  std::string name_;
  std::type_index signature_;
  void* kernels_[kNumDispatchKeys + 1] = {};
};

class Dispatcher {
 public:
  static Dispatcher& get();
  // The table for `name`; created on first use. Throws TypeError when the op
  // exists with another signature.
  OpTable& table(const std::string& name, std::type_index signature);
  [[noreturn]] static void throw_no_kernel(const OpTable& t, DispatchKeySet keys);
  // Names of the ops registered so far, sorted; `missing` keeps only those
  // without a kernel for that key (tests use it to find ops that lack a
  // backward formula).
  std::vector<std::string> op_names(std::optional<DispatchKey> missing = std::nullopt);
  // Ops that `key` cannot run: no kernel for it and no device-generic one,
  // though some other backend has one (the CUDA coverage test uses it).
  std::vector<std::string> ops_unsupported_on(DispatchKey key);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<OpTable>> tables_;
};

// Keys excluded on this thread: an autograd kernel excludes Autograd while it
// redispatches to the backend kernel.
DispatchKeySet& tls_excluded_keys();

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

// A typed handle on one op's table; cheap to call, meant to be a function-
// local static at the call site.
template <typename Sig> class Op;
template <typename R, typename... Args>
class Op<R(Args...)> {
 public:
  using Fn = R (*)(Args...);
  explicit Op(const std::string& name) : table_(&Dispatcher::get().table(name, typeid(R(Args...)))) {}

  R call(DispatchKeySet keys, Args... args) const {
    DispatchKeySet live = keys - tls_excluded_keys();
    void* fn = nullptr;
    if (!live.empty()) {
      int key = static_cast<int>(live.highest());
      fn = table_->kernel(key);
      if (fn == nullptr && key != static_cast<int>(DispatchKey::Autograd)) fn = table_->kernel(OpTable::kGenericSlot);
      if (fn == nullptr && key == static_cast<int>(DispatchKey::Autograd)) {
        // No gradient formula registered: autograd decides whether that is an
        // error (grad mode on and a floating result), then the op runs below it.
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
    }
    if (fn == nullptr) Dispatcher::throw_no_kernel(*table_, live);
    return reinterpret_cast<Fn>(fn)(std::forward<Args>(args)...);
  }
  void register_kernel(int slot, Fn fn) const { table_->set_kernel(slot, reinterpret_cast<void*>(fn)); }
  const OpTable& table() const { return *table_; }

 private:
  OpTable* table_;
};

// Registers fn as op `name`'s kernel for `key` at static-initialisation time:
//   static KernelRegistration<Sig> reg("add", DispatchKey::CPU, &add_cpu);
template <typename Sig>
struct KernelRegistration {
  KernelRegistration(const char* name, DispatchKey key, Sig* fn) {
    Op<Sig>(name).register_kernel(static_cast<int>(key), fn);
  }
  // Device-generic kernel (used when the backend key has none).
  KernelRegistration(const char* name, Sig* fn) { Op<Sig>(name).register_kernel(OpTable::kGenericSlot, fn); }
};

}  // namespace trainrun

// Calls op `name` with signature Sig through the dispatcher:
//   return TR_DISPATCH("add", Tensor(const Tensor&, const Tensor&), keys_of(a, b), a, b);
#define TR_DISPATCH(name, Sig, keys, ...)                  \
  ([&]() -> decltype(auto) {                               \
    static const ::trainrun::Op<Sig> tr_op_(name);         \
    return tr_op_.call(keys, __VA_ARGS__);                 \
  }())
