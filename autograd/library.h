#pragma once
// TORCH_LIBRARY-style registration of C++ custom ops, run at static
// initialization (before main, or when a shared object is loaded):
//
//   TRAINRUN_LIBRARY(mylib, m) {
//     CustomOpDefinition cube;
//     cube.cpu = [](const TensorList& in) { return mul(mul(in[0], in[0]), in[0]); };
//     cube.backward = [](const Tensor& g, const TensorList& in, const Tensor&) {
//       return TensorList{mul(mul(g, mul(in[0], in[0])), 3)};
//     };
//     m.def("cube", cube);
//   }
//   ...
//   CustomOp("mylib::cube")({x});
//
// Each def is register_custom_op("mylib::<name>", ...): the op dispatches on
// its inputs' device and through autograd like a built-in one, and
// trainrun.compile records it as one node (its backward's ops are recorded
// in the joint graph). A namespace may hold one TRAINRUN_LIBRARY block per
// program, as PyTorch's TORCH_LIBRARY.
#include <string>

#include "autograd/custom_op.h"

namespace trainrun {

class Library {
 public:
  explicit Library(std::string ns) : ns_(std::move(ns)) {}
  // Registers ns::name; throws ValueError for a taken or bad name, or a missing CPU kernel.
  CustomOp def(const std::string& name, CustomOpDefinition definition) {
    return register_custom_op(ns_ + "::" + name, std::move(definition));
  }
  const std::string& ns() const { return ns_; }

 private:
  std::string ns_;
};

namespace detail {
struct LibraryInit {
  LibraryInit(const char* ns, void (*init)(Library&)) {
    Library library(ns);
    init(library);
  }
};
}  // namespace detail

}  // namespace trainrun

#define TRAINRUN_LIBRARY(ns, m)                                                                     \
  static void trainrun_library_init_##ns(::trainrun::Library&);                                    \
  static const ::trainrun::detail::LibraryInit trainrun_library_static_init_##ns(#ns,               \
                                                                                 &trainrun_library_init_##ns); \
  static void trainrun_library_init_##ns(::trainrun::Library& m)
