#include "tests/multirank/run_ranks.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

extern char** environ;

namespace trainrun {
namespace multirank {

std::string RankRun::output_of(int rank) const {
  const std::string mine = rank >= 0 && rank < static_cast<int>(rank_output.size()) ? rank_output[rank] : "";
  return mine + launcher_output;
}

RankRun run_ranks(const std::string& worker, const std::string& scenario, const RankRunOptions& o,
                  const std::vector<std::string>& args) {
  RankRun run;
  run.what = scenario + " with " + std::to_string(o.world) + " ranks";
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), o.env.begin(), o.env.end());
  std::string rank0;
  for (const auto& kv : o.rank0_env) rank0 += (rank0.empty() ? "" : ";") + kv;
  env_strings.push_back("MULTIRANK_RANK0_ENV=" + rank0);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv_strings = {"launcher/trainrun", "--nproc-per-node", std::to_string(o.world),
                                           "--grace-period", "2"};
  argv_strings.insert(argv_strings.end(), o.launcher_flags.begin(), o.launcher_flags.end());
  argv_strings.insert(argv_strings.end(), {"--no-python", worker, scenario});
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::string log = ::testing::TempDir() + "/multirank_" + scenario + "_" + std::to_string(o.world) + ".log";
  for (char& c : log)
    if (c == ' ') c = '_';
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // Its own process group: at the deadline, one kill reaches the launcher
  // and every worker it started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    ADD_FAILURE() << "cannot start launcher/trainrun for " << run.what << ": " << strerror(rc);
    return run;
  }
  const auto end = std::chrono::steady_clock::now() + o.deadline;
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::steady_clock::now() > end) {
      run.killed_at_deadline = true;
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);  // nothing of the job outlives the test (a no-op when all exited)

  std::ifstream in(log);
  run.rank_output.assign(o.world, "");
  std::string line;
  while (std::getline(in, line)) {
    bool rank_line = false;
    for (int r = 0; r < o.world && !rank_line; ++r) {
      const std::string prefix = "[rank" + std::to_string(r) + "]:";
      if (line.rfind(prefix, 0) == 0) {
        run.rank_output[r] += line.substr(prefix.size()) + "\n";
        rank_line = true;
      }
    }
    if (!rank_line) run.launcher_output += line + "\n";
  }
  return run;
}

void expect_ranks_passed(const RankRun& run) {
  EXPECT_FALSE(run.killed_at_deadline) << run.what << ": killed at the deadline\n" << run.output_of(0);
  EXPECT_EQ(run.exit_code, 0) << run.what << " failed:\n" << run.launcher_output;
  for (int r = 0; r < static_cast<int>(run.rank_output.size()); ++r)
    EXPECT_NE(run.rank_output[r].find("rank " + std::to_string(r) + ": ok"), std::string::npos)
        << run.what << ", rank " << r << " did not pass:\n"
        << run.output_of(r);
}

}  // namespace multirank
}  // namespace trainrun
