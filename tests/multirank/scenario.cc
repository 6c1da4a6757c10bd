#include "tests/multirank/scenario.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace trainrun {
namespace multirank {
namespace {

std::map<std::string, Scenario>& registry() {
  static auto* scenarios = new std::map<std::string, Scenario>();
  return *scenarios;
}

// "K=V;K2=V2" into the environment.
void apply_env_list(const std::string& list) {
  size_t start = 0;
  while (start < list.size()) {
    const size_t semi = list.find(';', start);
    const std::string kv = list.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
    if (const size_t eq = kv.find('='); eq != std::string::npos)
      setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
}

}  // namespace

bool register_scenario(const char* name, Scenario fn) {
  if (!registry().emplace(name, fn).second) {
    std::fprintf(stderr, "scenario '%s' is defined twice\n", name);
    std::abort();
  }
  return true;
}

int env_rank() {
  const char* rank = std::getenv("RANK");
  return rank == nullptr ? 0 : std::atoi(rank);
}

int run_scenario_main(int argc, char** argv) {
  const auto it = argc >= 2 ? registry().find(argv[1]) : registry().end();
  if (it == registry().end()) {
    std::string known;
    for (const auto& [name, fn] : registry()) known += (known.empty() ? "" : "|") + name;
    std::fprintf(stderr, "usage: %s %s [args...]%s%s\n", argv[0], known.c_str(), argc >= 2 ? "; unknown scenario: " : "",
                 argc >= 2 ? argv[1] : "");
    return 2;
  }
  const int rank = env_rank();
  if (const char* extra = std::getenv("MULTIRANK_RANK0_ENV"); extra != nullptr && rank == 0) apply_env_list(extra);
  try {
    it->second(ScenarioArgs(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rank, e.what());
    std::fflush(stderr);
    return 1;
  }
  std::fprintf(stderr, "rank %d: ok\n", rank);
  return 0;
}

}  // namespace multirank
}  // namespace trainrun
