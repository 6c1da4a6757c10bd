#include "tensor/dispatcher.h"

#include <algorithm>
#include <memory>

namespace trainrun {

void OpTable::set_kernel(int slot, void* fn) {
  TR_CHECK(kernels_[slot] == nullptr, ValueError,
           "op '{}' already has a kernel for dispatch slot {}: registering twice is a bug", name_,
           slot == kGenericSlot     ? "Generic"
           : slot == kCompositeSlot ? "Composite"
                                    : dispatch_key_name(static_cast<DispatchKey>(slot)));
  kernels_[slot] = fn;
}

void OpTable::set_boxed(std::function<void(DispatchKeySet, Stack&)> boxed) {
  std::call_once(boxed_once_, [&] { boxed_ = std::move(boxed); });
}

void OpTable::call_boxed(DispatchKeySet keys, Stack& stack) const {
  TR_CHECK(boxed_, NotImplementedError, "op '{}' has no boxed form: its signature has a type with no IValue", name_);
  boxed_(keys, stack);
}

void OpTable::redispatch_boxed(DispatchKey key, DispatchKeySet keys, Stack& stack) const {
  ExcludeDispatchKeyGuard below(key);
  call_boxed(keys, stack);
}

Dispatcher::Dispatcher() {
  for (auto& f : fallbacks_) f = std::make_shared<const KeyFallback>();
}

Dispatcher& Dispatcher::get() {
  static Dispatcher* d = new Dispatcher();  // never destroyed: kernels register at static init
  return *d;
}

void Dispatcher::set_fallback(DispatchKey key, KeyFallback fallback) {
  TR_CHECK(!is_backend_key(key) && key != DispatchKey::Autograd && key < DispatchKey::NumKeys, ValueError,
           "set_fallback: {} has a fixed rule; only functionality keys such as Tracing take a fallback",
           dispatch_key_name(key));
  TR_CHECK(fallback.kind != KeyFallback::Boxed || fallback.kernel, ValueError,
           "set_fallback({}): a Boxed fallback needs a kernel", dispatch_key_name(key));
  std::atomic_store(&fallbacks_[static_cast<int>(key)],
                    std::shared_ptr<const KeyFallback>(std::make_shared<KeyFallback>(std::move(fallback))));
}

OpTable& Dispatcher::table(const std::string& name, std::type_index signature) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(name);
  if (it == tables_.end()) {
    it = tables_.emplace(name, std::make_unique<OpTable>(name, signature)).first;
  }
  TR_CHECK(it->second->signature() == signature, TypeError,
           "op '{}' was registered with signature {} but is used with {}", name,
           it->second->signature().name(), signature.name());
  return *it->second;
}

const OpTable* Dispatcher::find(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

std::vector<std::string> Dispatcher::op_names(std::optional<DispatchKey> missing) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, table] : tables_) {
    if (missing && table->kernel(static_cast<int>(*missing)) != nullptr) continue;
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> Dispatcher::ops_unsupported_on(DispatchKey key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, table] : tables_) {
    if (table->kernel(static_cast<int>(key)) != nullptr || table->kernel(OpTable::kGenericSlot) != nullptr) continue;
    bool other_backend = false;
    for (int k = 0; k <= static_cast<int>(DispatchKey::LastBackend); ++k)
      other_backend = other_backend || (k != static_cast<int>(key) && table->kernel(k) != nullptr);
    if (other_backend) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void Dispatcher::throw_no_kernel(const OpTable& t, DispatchKeySet keys) {
  throw NotImplementedError(fmt::format(
      "op '{}' has no kernel for dispatch key {}", t.name(),
      keys.empty() ? "<none>" : dispatch_key_name(keys.highest())));
}

MissingFormulaHook& missing_formula_hook() {
  static MissingFormulaHook hook = nullptr;
  return hook;
}

DispatchKeySet& tls_excluded_keys() {
  thread_local DispatchKeySet excluded;
  return excluded;
}

DispatchKeySet& tls_included_keys() {
  thread_local DispatchKeySet included;
  return included;
}

}  // namespace trainrun
