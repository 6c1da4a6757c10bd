// aot_run PACKAGE INPUTS OUTPUTS: runs an AOT package (trainrun.aot_compile)
// from C++ alone. INPUTS is a safetensors file holding the model's inputs by
// name; the outputs are written to OUTPUTS as output0, output1, ...
// Prints how long the run took (the median of --repeat N runs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "compile/aot_model.h"
#include "tensor/safetensors.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s PACKAGE INPUTS.safetensors OUTPUTS.safetensors [--repeat N]\n", argv[0]);
    return 2;
  }
  int repeat = 1;
  if (argc >= 6 && std::strcmp(argv[4], "--repeat") == 0) repeat = std::max(1, std::atoi(argv[5]));
  try {
    trainrun::aot::Model model(argv[1]);
    std::map<std::string, trainrun::Tensor> given = trainrun::load_safetensors(argv[2]);
    std::vector<trainrun::Tensor> inputs;
    for (const auto& in : model.inputs()) {
      auto it = given.find(in.name);
      if (it == given.end()) {
        std::fprintf(stderr, "aot_run: %s has no input '%s'\n", argv[2], in.name.c_str());
        return 1;
      }
      inputs.push_back(it->second);
    }
    std::vector<trainrun::Tensor> outputs;
    std::vector<double> times;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      outputs = model.run(inputs);
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    std::map<std::string, trainrun::Tensor> named;
    for (size_t i = 0; i < outputs.size(); ++i) named["output" + std::to_string(i)] = outputs[i];
    trainrun::save_safetensors(named, argv[3]);
    std::printf("aot_run: %zu outputs, median %.1f us over %d runs\n", outputs.size(), times[times.size() / 2], repeat);
  } catch (const trainrun::Error& e) {
    std::fprintf(stderr, "aot_run: %s\n", e.what());
    return 1;
  }
  return 0;
}
