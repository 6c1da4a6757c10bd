#include "compile/aot_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "autograd/grad_mode.h"
#include "base/error.h"
#include "tensor/safetensors.h"

namespace trainrun::aot {

Model::Model(const std::string& path) : path_(path) {
  const std::filesystem::path dir(path);
  TR_CHECK(std::filesystem::exists(dir / "model.so") && std::filesystem::exists(dir / "weights.safetensors"),
           ValueError, "aot Model({}): not a package (it needs model.so and weights.safetensors)", path);
  library_ = compile::KernelLibrary::open((dir / "model.so").string());
  auto program = reinterpret_cast<const char* (*)()>(library_->symbol("trainrun_aot_program"));
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(program());
  } catch (const nlohmann::json::exception& e) {
    TR_CHECK(false, ValueError, "aot Model({}): its program is not valid JSON: {}", path, e.what());
  }
  const std::map<std::string, Tensor> weights = load_safetensors((dir / "weights.safetensors").string());
  auto loop = [this](const std::string& name) {
    return reinterpret_cast<compile::FusedKernel::Fn>(library_->symbol(name));
  };
  try {
    program_ = compile::program_from_json(json, weights, loop, library_);
  } catch (const nlohmann::json::exception& e) {
    TR_CHECK(false, ValueError, "aot Model({}): a malformed program: {}", path, e.what());
  }
}

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs) const {
  const auto& expected = program_.inputs;
  TR_CHECK(inputs.size() == expected.size(), ValueError, "aot Model({}): {} inputs given, the model takes {}", path_,
           inputs.size(), expected.size());
  std::vector<Tensor> args;
  args.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const compile::ProgramInput& e = expected[i];
    TR_CHECK(t.defined(), ValueError, "aot Model({}): input '{}' is undefined", path_, e.name);
    TR_CHECK(t.device().is_cpu(), ValueError, "aot Model({}): input '{}' is on {}; the model runs on the CPU", path_,
             e.name, t.device().str());
    TR_CHECK(t.dtype() == e.dtype, ValueError, "aot Model({}): input '{}' is {}; the model was compiled for {}", path_,
             e.name, dtype_name(t.dtype()), dtype_name(e.dtype));
    TR_CHECK(program_.dynamic != nullptr || t.sizes() == e.sizes, ValueError,
             "aot Model({}): input '{}' has shape [{}]; the model was compiled for [{}]", path_, e.name,
             fmt::join(t.sizes(), ", "), fmt::join(e.sizes, ", "));
    args.push_back(t.contiguous());  // (recorded contiguous; fused loops read them so)
  }
  NoGradGuard no_grad;
  if (program_.dynamic == nullptr) return program_.graph->run(args);
  std::vector<std::string> names;
  for (const auto& e : expected) names.push_back(e.name);
  std::vector<int64_t> values;
  try {
    values = program_.dynamic->bind(args, names);
  } catch (const ValueError& e) {
    TR_CHECK(false, ValueError, "aot Model({}): {}", path_, e.what());
  }
  return program_.dynamic->at(values)->run(args);
}

}  // namespace trainrun::aot
