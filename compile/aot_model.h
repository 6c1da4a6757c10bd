#pragma once
// Runs a package trainrun.aot_compile wrote (aot_package.h) from C++, with no
// Python: the weights are loaded once, the program's ops go through the
// dispatcher and its fused loops are the package's compiled functions.
//
//   trainrun::aot::Model model("/path/to/package");
//   std::vector<trainrun::Tensor> out = model.run({x});
#include <memory>
#include <string>
#include <vector>

#include "compile/kernel_library.h"
#include "compile/program_io.h"

namespace trainrun::aot {

class Model {
 public:
  // Throws ValueError naming the file and what is wrong (missing, corrupt,
  // an op this build lacks).
  explicit Model(const std::string& path);

  // The outputs for `inputs`, in the exported order. Refuses (ValueError,
  // naming the input) a wrong count, shape, dtype or device. A program
  // exported with dynamic shapes takes any sizes of its dynamic dims in
  // their ranges.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  const std::vector<compile::ProgramInput>& inputs() const { return program_.inputs; }
  size_t num_outputs() const { return program_.graph->outputs().size(); }
  // The program itself (its constants are the loaded weights), as trainrun.export.load reads it back.
  std::shared_ptr<const compile::CapturedGraph> graph() const { return program_.graph; }
  // Its dynamic dims and size polynomials; null when it was exported for one shape.
  std::shared_ptr<const compile::DynamicProgram> dynamic() const { return program_.dynamic; }

 private:
  std::string path_;
  std::shared_ptr<compile::KernelLibrary> library_;
  compile::LoadedProgram program_;
};

}  // namespace trainrun::aot
