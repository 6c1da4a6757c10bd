// The op list (tensor/ops.yaml) and the dispatcher agree: every op of the
// list has what its tags promise (CPU and CUDA kernels, or one device-generic
// kernel; a backward formula unless it has no gradient), with the
// list's signature, and no op of the core lives outside the list.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tensor/dispatcher.h"
#include "tensor/op_schemas.h"
#include "tests/tensor/test_util.h"

namespace trainrun {
namespace {

std::string joined(const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, ", ")); }

bool has(const OpTable& t, DispatchKey key) { return t.kernel(static_cast<int>(key)) != nullptr; }

TEST(OpList, EveryOpOfTheListIsRegisteredWithItsSignature) {
  std::vector<std::string> missing, mismatched;
  for (const OpListEntry& e : op_list()) {
    const OpTable* t = Dispatcher::get().find(e.name);
    if (t == nullptr) {
      missing.push_back(e.name);
    } else if (t->signature() != e.signature) {
      mismatched.push_back(e.name);
    }
  }
  EXPECT_TRUE(missing.empty()) << "listed in tensor/ops.yaml but never registered: " << joined(missing);
  EXPECT_TRUE(mismatched.empty()) << "registered with another signature than the list's: " << joined(mismatched);
}

TEST(OpList, EveryOpHasItsKernels) {
  std::vector<std::string> no_cpu, no_cuda, no_meta, no_generic, no_formula, stale_tag;
  for (const OpListEntry& e : op_list()) {
    const OpTable* t = Dispatcher::get().find(e.name);
    if (t == nullptr) continue;  // reported above
    const bool composite = t->kernel(OpTable::kCompositeSlot) != nullptr;
    if (e.device_generic) {
      if (t->kernel(OpTable::kGenericSlot) == nullptr) no_generic.push_back(e.name);
    } else if (!composite) {
      if (!has(*t, DispatchKey::CPU)) no_cpu.push_back(e.name);
      if (!has(*t, DispatchKey::CUDA)) no_cuda.push_back(e.name);
      if (!has(*t, DispatchKey::Meta)) no_meta.push_back(e.name);  // (its kernel may refuse, naming why)
    }
    const bool gradient_expected = !e.nondifferentiable && !e.no_grad;
    if (gradient_expected && !composite && !has(*t, DispatchKey::Autograd)) no_formula.push_back(e.name);
    if (!gradient_expected && has(*t, DispatchKey::Autograd)) stale_tag.push_back(e.name);
  }
  EXPECT_TRUE(no_cpu.empty()) << "ops without a CPU kernel: " << joined(no_cpu);
  EXPECT_TRUE(no_cuda.empty()) << "ops without a CUDA kernel: " << joined(no_cuda);
  EXPECT_TRUE(no_meta.empty()) << "ops without a meta kernel (tensor/meta/): " << joined(no_meta);
  EXPECT_TRUE(no_generic.empty()) << "device-generic ops without a device-generic kernel: " << joined(no_generic);
  EXPECT_TRUE(no_formula.empty()) << "ops without a backward formula (tag them nondifferentiable if their results "
                                     "are integers or bools): "
                                  << joined(no_formula);
  EXPECT_TRUE(stale_tag.empty()) << "tagged nondifferentiable or no_grad but have a backward formula: "
                                 << joined(stale_tag);
}

TEST(OpList, NoOpOfTheCoreLivesOutsideTheList) {
  std::set<std::string> listed;
  for (const OpListEntry& e : op_list()) listed.insert(e.name);
  std::vector<std::string> unlisted;
  for (const std::string& name : Dispatcher::get().op_names()) {
    // Namespaced ops ("my_ext::fused_gelu") are extensions and tests: they register by name.
    if (name.find("::") == std::string::npos && !listed.count(name)) unlisted.push_back(name);
  }
  EXPECT_TRUE(unlisted.empty()) << "ops registered without an entry in tensor/ops.yaml: " << joined(unlisted);
}

TEST(OpList, GeneratedStructsCarryTheListsNamesAndSchemas) {
  EXPECT_STREQ(ops::max_dim::name, "max.dim");
  EXPECT_STREQ(ops::add::schema, "add(Tensor self, Tensor other, *, Scalar alpha=1, Tensor? out=None) -> Tensor");
  static_assert(std::is_same_v<ops::max_dim::Sig, std::tuple<Tensor, Tensor>(const Tensor&, int64_t, bool)>);
  static_assert(std::is_same_v<ops::copy_::Sig, Tensor&(Tensor&, const Tensor&)>);
  static_assert(std::is_same_v<ops::random_fill_::Sig, void(Tensor&, int64_t, double, double, uint64_t, uint64_t)>);
  const auto& list = op_list();
  auto it = std::find_if(list.begin(), list.end(), [](const OpListEntry& e) { return std::string(e.name) == "eq"; });
  ASSERT_NE(it, list.end());
  EXPECT_TRUE(it->pointwise);
  EXPECT_TRUE(it->nondifferentiable);
  EXPECT_EQ(it->python, (std::vector<std::string>{"function", "method"}));
  // A typed call through a generated struct reaches the kernel.
  Tensor a = ones({3}), b = full({3}, 2.0);
  Tensor c = ops::add::call(keys_of(a, b), a, b, 3, Tensor());
  EXPECT_EQ(values(c), (std::vector<double>{7, 7, 7}));
}

}  // namespace
}  // namespace trainrun
