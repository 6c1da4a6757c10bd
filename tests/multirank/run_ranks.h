#pragma once
// The test side of a multi-rank C++ test: runs N ranks of a scenario
// (scenario.h) under the trainrun launcher, which hosts the store and sets
// RANK/WORLD_SIZE/MASTER_*. A run that outlives its deadline is killed with
// every process it started (its own process group), never waited on.
//
//   RankRun run = run_ranks("tests/c10d/c10d_worker", "collectives", {.world = 4});
//   expect_ranks_passed(run);
#include <chrono>
#include <string>
#include <vector>

namespace trainrun {
namespace multirank {

struct RankRunOptions {
  int world = 2;
  std::chrono::seconds deadline{120};
  std::vector<std::string> env;        // "K=V" for every rank (and the launcher)
  std::vector<std::string> rank0_env;  // "K=V" for rank 0 only
  std::vector<std::string> launcher_flags;
};

struct RankRun {
  std::string what;            // "collectives with 4 ranks", for messages
  int exit_code = -1;          // the launcher's status (0: every rank passed)
  bool killed_at_deadline = false;
  std::vector<std::string> rank_output;  // per rank: its "[rankN]:" lines, prefix removed
  std::string launcher_output;           // every other line (the launcher's own, e.g. its failure summary)
  // Rank r's lines followed by the launcher's: what a failure message shows.
  std::string output_of(int rank) const;
};

// `worker` is a path relative to the test's runfiles root ("tests/c10d/c10d_worker").
RankRun run_ranks(const std::string& worker, const std::string& scenario, const RankRunOptions& options,
                  const std::vector<std::string>& args = {});

// GoogleTest expectations: the job exited 0 in time, and every rank said "ok".
void expect_ranks_passed(const RankRun& run);

}  // namespace multirank
}  // namespace trainrun
