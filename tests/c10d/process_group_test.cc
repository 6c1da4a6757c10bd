// Runs each c10d_worker scenario with 2, 3 and 4 ranks under the trainrun
// launcher, and checks that every rank passed. A run that outlives its
// deadline is killed and reported, never waited on.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "c10d/distributed.h"
#include "c10d/gloo/process_group_gloo.h"
#include "store/hash_store.h"
#include "tensor/ops.h"
#include "tests/expect_error.h"

extern char** environ;

namespace trainrun {
namespace c10d {
namespace {

using namespace std::chrono_literals;

struct RankResult {
  int exit_code = -1;       // the job's exit status (trainrun's); -1: killed at the deadline
  std::string stderr_text;  // this rank's lines, and trainrun's own (its failure summary)
};

// Runs `world` ranks of the scenario under the trainrun launcher (which hosts
// the store and sets the environment). extra_env goes to every rank;
// rank0_env to rank 0 only (the worker applies it, as the launcher gives
// every rank the same environment).
std::vector<RankResult> run_ranks(const std::string& scenario, int world, std::chrono::seconds deadline,
                                  const std::vector<std::string>& extra_env = {},
                                  const std::vector<std::string>& rank0_env = {}) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::string rank0;
  for (const auto& kv : rank0_env) rank0 += (rank0.empty() ? "" : ";") + kv;
  env_strings.push_back("C10D_TEST_RANK0_ENV=" + rank0);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log = ::testing::TempDir() + "/c10d_" + scenario + "_" + std::to_string(world) + ".log";
  std::vector<std::string> args = {"launcher/trainrun",
                                   "--nproc-per-node",
                                   std::to_string(world),
                                   "--grace-period",
                                   "2",
                                   "--no-python",
                                   "tests/c10d/c10d_worker",
                                   scenario};
  std::vector<char*> argv;
  for (auto& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()), 0) << "cannot start trainrun";
  posix_spawn_file_actions_destroy(&actions);
  int code = -1;
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);  // its workers go with it (PR_SET_PDEATHSIG)
      waitpid(pid, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  std::ifstream in(log);
  std::vector<RankResult> results(world);
  std::string line;
  while (std::getline(in, line)) {
    bool rank_line = false;
    for (int r = 0; r < world; ++r) {
      const std::string prefix = "[rank" + std::to_string(r) + "]:";
      if (line.rfind(prefix, 0) == 0) {
        results[r].stderr_text += line.substr(prefix.size()) + "\n";
        rank_line = true;
      }
    }
    if (!rank_line)
      for (auto& res : results) res.stderr_text += line + "\n";
  }
  for (auto& res : results) res.exit_code = code;
  return results;
}

void expect_all_passed(const std::string& scenario, int world, const std::vector<std::string>& extra_env = {},
                       const std::vector<std::string>& rank0_env = {}) {
  auto results = run_ranks(scenario, world, 120s, extra_env, rank0_env);
  for (int r = 0; r < world; ++r)
    EXPECT_EQ(results[r].exit_code, 0) << scenario << " with " << world << " ranks, rank " << r
                                       << (results[r].exit_code == -1 ? ": killed at the deadline" : "") << ":\n"
                                       << results[r].stderr_text;
}

// Ranks of one host use the shared-memory transport for allreduce,
// allgather, reduce_scatter and broadcast; the rest (and everything when it
// is off) goes over Gloo's TCP.
TEST(ProcessGroupGloo, EveryCollectiveOpAndDtype) {
  for (int world : {2, 3, 4}) expect_all_passed("collectives", world);
}

TEST(ProcessGroupGloo, EveryCollectiveOverTcpOnly) {
  for (int world : {2, 3}) expect_all_passed("collectives", world, {"TRAINRUN_SHM_COLLECTIVES=0"});
  // One rank turning it off turns it off for the whole group (no split decision).
  expect_all_passed("collectives", 3, {}, {"TRAINRUN_SHM_COLLECTIVES=0"});
}

TEST(ProcessGroupGloo, PointToPoint) {
  for (int world : {2, 3, 4}) expect_all_passed("p2p", world);
}

TEST(ProcessGroupGloo, AsyncWorkAndConcurrentGroups) {
  for (int world : {2, 4}) expect_all_passed("async", world);
}

TEST(ProcessGroupGloo, ADeadPeerFailsTheOthersWithinTheTimeout) {
  for (bool shm : {true, false}) {
    auto results = run_ranks("peer_dies", 3, 60s, {shm ? "TRAINRUN_SHM_COLLECTIVES=1" : "TRAINRUN_SHM_COLLECTIVES=0"});
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(results[r].exit_code, 0) << "shm=" << shm << " rank " << r << ":\n" << results[r].stderr_text;
    const std::string& log = results[0].stderr_text;
    EXPECT_NE(log.find("allreduce #2 on group 'default'"), std::string::npos) << log;
    EXPECT_NE(log.find("had not entered #2: 2"), std::string::npos) << log;
    if (shm) {
      EXPECT_NE(log.find("has exited"), std::string::npos) << log;  // the shared-memory barrier saw the pid go
    }
  }
  // Segment names are unlinked as soon as every rank has mapped them: the
  // killed rank left nothing behind in /dev/shm.
  std::vector<std::string> left;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind("trainrun-", 0) == 0) left.push_back(e->d_name);
    closedir(d);
  }
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << left.size() << " segments, e.g. "
                            << (left.empty() ? "" : left[0]);
}

TEST(ProcessGroupGloo, ATimeoutNamesTheRanksThatHadNotEnteredTheCollective) {
  for (const char* env : {"TRAINRUN_SHM_COLLECTIVES=1", "TRAINRUN_SHM_COLLECTIVES=0"}) {
    auto results = run_ranks("late_rank", 2, 60s, {env});
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(results[r].exit_code, 0) << env << " rank " << r << ":\n" << results[r].stderr_text;
  }
}

TEST(ProcessGroupGloo, DebugModeReportsMismatchedCollectives) { expect_all_passed("mismatch", 2); }

TEST(DistributedDataParallel, GradientsMatchOneProcessOnTheWholeBatch) {
  for (int world : {2, 3}) expect_all_passed("ddp", world);
}

TEST(ProcessGroupGloo, SingleRankGroupAndBadArguments) {
  auto store = std::make_shared<HashStore>();
  ProcessGroupGloo pg(store, 0, 1, "solo", {});
  Tensor t = full({3}, 2.0);
  pg.allreduce(t, ReduceOp::PRODUCT)->wait();
  EXPECT_EQ(t.select(0, 0).item<double>(), 2.0);
  expect_error<ValueError>([&] { pg.broadcast(t, 1); }, {"broadcast", "root 1", "not a rank", "size 1"});
  expect_error<ValueError>([&] { pg.send(t, 0); }, {"send", "itself"});
  Tensor out = empty({4});
  expect_error<ValueError>([&] { pg.reduce_scatter_tensor(out, t); }, {"reduce_scatter_tensor", "must hold"});
  expect_error<ValueError>([] { ProcessGroupGloo(std::make_shared<HashStore>(), 2, 2, "bad", {}); },
                           {"rank 2", "[0, 2)"});
}

TEST(InitProcessGroup, ClearErrorsForMissingOrMalformedSettings) {
  unsetenv("RANK");
  expect_error<ValueError>([] { init_process_group(); }, {"env://", "RANK is not set"});
  InitOptions o;
  o.init_method = "tcp://127.0.0.1:29500";
  expect_error<ValueError>([&] { init_process_group(o); }, {"rank and world_size"});
  o.init_method = "tcp://127.0.0.1:29500?rank=x&world_size=2";
  expect_error<ValueError>([&] { init_process_group(o); }, {"rank 'x'", "not an integer"});
  o.init_method = "udp://somewhere";
  expect_error<ValueError>([&] { init_process_group(o); }, {"udp://somewhere", "env://", "tcp://", "file://"});
  o.init_method = "env://";
  o.backend = "mpi";
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  expect_error<ValueError>([&] { init_process_group(o); }, {"backend 'mpi'", "gloo"});
  EXPECT_FALSE(is_initialized());
  expect_error<ValueError>([] { get_rank(); }, {"not initialized", "init_process_group"});
  // A one-rank job through file://.
  InitOptions f;
  f.init_method = "file://" + ::testing::TempDir() + "/c10d_init_file?rank=0&world_size=1";
  init_process_group(f);
  EXPECT_EQ(get_rank(), 0);
  EXPECT_EQ(get_world_size(), 1);
  expect_error<ValueError>([&] { init_process_group(f); }, {"already initialized"});
  auto sub = new_group({0});
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->name(), "group_1");
  expect_error<ValueError>([] { new_group({0, 0}); }, {"repeat"});
  destroy_process_group();
  EXPECT_FALSE(is_initialized());
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun
