#include "tensor/dispatcher.h"

#include <algorithm>
#include <memory>

namespace trainrun {

void OpTable::set_kernel(int slot, void* fn) {
  TR_CHECK(kernels_[slot] == nullptr, ValueError,
           "op '{}' already has a kernel for dispatch slot {}: registering twice is a bug", name_,
           slot == kGenericSlot ? "Generic" : dispatch_key_name(static_cast<DispatchKey>(slot)));
  kernels_[slot] = fn;
}

Dispatcher& Dispatcher::get() {
  static Dispatcher* d = new Dispatcher();  // never destroyed: kernels register at static init
  return *d;
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
    for (DispatchKey k : {DispatchKey::CPU, DispatchKey::CUDA})
      other_backend = other_backend || (k != key && table->kernel(static_cast<int>(k)) != nullptr);
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

}  // namespace trainrun
