#pragma once
// The rank side of a multi-rank C++ test. A worker binary defines scenarios
// by name and uses run_scenario_main as its main:
//
//   TR_RANK_SCENARIO(allreduce_sums) {   // args: the words after the name
//     ...checks; throw (or fail()) on a wrong result...
//   }
//   int main(int argc, char** argv) { return trainrun::multirank::run_scenario_main(argc, argv); }
//
// The test side (run_ranks.h) starts N ranks of `worker NAME args...` under
// the trainrun launcher. A scenario passes by returning; an exception ends
// the rank with status 1 and "rank R: FAILED: <what>" on stderr.
#include <string>
#include <vector>

namespace trainrun {
namespace multirank {

using ScenarioArgs = std::vector<std::string>;
using Scenario = void (*)(const ScenarioArgs& args);

// Registers `fn` under `name` (at static initialisation); returns true.
bool register_scenario(const char* name, Scenario fn);

// main() of a worker: runs the scenario named by argv[1] with argv[2...].
// Exit status: 0 passed, 1 failed, 2 unknown scenario (the known ones are
// listed). MULTIRANK_RANK0_ENV="K=V;K2=V2" is applied on rank 0 only before
// the scenario starts (the launcher gives every rank the same environment).
int run_scenario_main(int argc, char** argv);

// This rank's RANK from the launcher's environment (0 when unset).
int env_rank();

}  // namespace multirank
}  // namespace trainrun

#define TR_RANK_SCENARIO(name)                                                          \
  static void name##_rank_scenario(const ::trainrun::multirank::ScenarioArgs& args);    \
  [[maybe_unused]] static const bool name##_rank_scenario_registered =                  \
      ::trainrun::multirank::register_scenario(#name, &name##_rank_scenario);           \
  static void name##_rank_scenario([[maybe_unused]] const ::trainrun::multirank::ScenarioArgs& args)
