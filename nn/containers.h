#pragma once
// Holders of child modules without a forward of their own: ModuleList
// (children "0", "1", ...) and ModuleDict (children by name). Sequential, a
// ModuleList that runs its children in order, is in layers.h.
#include "nn/module.h"

namespace trainrun {
namespace nn {

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules);
  ModuleList& append(std::shared_ptr<Module> m);
  size_t size() const { return named_children().size(); }
  // Throws IndexError naming the index and the size.
  std::shared_ptr<Module> at(size_t i) const;

 protected:
  // For lists with a forward of their own (Sequential).
  ModuleList(std::string type_name, std::vector<std::shared_ptr<Module>> modules);
};

class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  ModuleDict& insert(const std::string& name, std::shared_ptr<Module> m);
  bool contains(const std::string& name) const;
  // Throws ValueError naming the key and the keys there are.
  std::shared_ptr<Module> at(const std::string& name) const;
  std::vector<std::string> keys() const;
};

}  // namespace nn
}  // namespace trainrun
