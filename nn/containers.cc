#include "nn/containers.h"

namespace trainrun {
namespace nn {

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> modules) : ModuleList("ModuleList", std::move(modules)) {}

ModuleList::ModuleList(std::string type_name, std::vector<std::shared_ptr<Module>> modules)
    : Module(std::move(type_name)) {
  for (auto& m : modules) append(std::move(m));
}

ModuleList& ModuleList::append(std::shared_ptr<Module> m) {
  TR_CHECK(m != nullptr, ValueError, "{}: cannot append a null module", type_name());
  register_module(std::to_string(size()), std::move(m));
  return *this;
}

std::shared_ptr<Module> ModuleList::at(size_t i) const {
  auto children = named_children();
  TR_CHECK(i < children.size(), IndexError, "{}: index {} is out of range for {} modules", type_name(), i,
           children.size());
  return children[i].second;
}

ModuleDict& ModuleDict::insert(const std::string& name, std::shared_ptr<Module> m) {
  TR_CHECK(m != nullptr, ValueError, "ModuleDict: cannot insert a null module under '{}'", name);
  register_module(name, std::move(m));
  return *this;
}

bool ModuleDict::contains(const std::string& name) const {
  for (auto& [n, _] : named_children())
    if (n == name) return true;
  return false;
}

std::shared_ptr<Module> ModuleDict::at(const std::string& name) const {
  for (auto& [n, m] : named_children())
    if (n == name) return m;
  throw ValueError(fmt::format("ModuleDict: no module named '{}' (keys: [{}])", name, fmt::join(keys(), ", ")));
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (auto& [n, _] : named_children()) out.push_back(n);
  return out;
}

}  // namespace nn
}  // namespace trainrun
