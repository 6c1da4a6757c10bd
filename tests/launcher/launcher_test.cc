// The trainrun launcher with real workers (tests/launcher/launcher_worker):
// the environment, fail-fast with a root-cause summary, restarts, signal
// forwarding, no orphans when the agent is SIGKILLed, two jobs on one host,
// a two-node job on loopback, log lines that never interleave, bad flags.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "launcher/gpu_count.h"

extern char** environ;

namespace trainrun {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char* kTrainrun = "launcher/trainrun";
const char* kWorker = "tests/launcher/launcher_worker";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// A running trainrun whose stdout and stderr go to files.
struct Agent {
  pid_t pid = -1;
  std::string out_path, err_path;
  int status = -1;

  Agent(const std::vector<std::string>& args, const std::string& name) {
    const std::string dir = ::testing::TempDir();
    out_path = dir + "/" + name + ".out";
    err_path = dir + "/" + name + ".err";
    std::vector<std::string> all = {kTrainrun};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_EQ(posix_spawn(&pid, kTrainrun, &fa, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Agent() {
    if (pid > 0 && status == -1) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  // The exit code (128 + signal when killed); -1 if still running at the deadline (then killed).
  int wait(std::chrono::seconds deadline = 60s) {
    const auto end = Clock::now() + deadline;
    while (Clock::now() < end) {
      int st = 0;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status;
      }
      std::this_thread::sleep_for(5ms);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    status = -2;
    return -1;
  }
  std::string out() const { return read_file(out_path); }
  std::string err() const { return read_file(err_path); }
};

std::map<std::string, std::string> env_of_rank(const std::string& out, int rank) {
  std::map<std::string, std::string> env;
  std::istringstream in(out);
  std::string line, prefix = "[rank" + std::to_string(rank) + "]:";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    line = line.substr(prefix.size());
    env[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
  }
  return env;
}

bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';  // a zombie is gone too
}

std::string fresh_dir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

TEST(Launcher, WorkersGetTorchrunsEnvironment) {
  Agent a({"--nproc-per-node", "3", "--no-python", kWorker, "env"}, "env");
  ASSERT_EQ(a.wait(), 0) << a.err();
  std::set<std::string> ports, run_ids;
  for (int r = 0; r < 3; ++r) {
    auto env = env_of_rank(a.out(), r);
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(r));
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(env["ROLE_NAME"], "default");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_NE(env["MASTER_PORT"], "0");
    EXPECT_EQ(env["TRAINRUN_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
    EXPECT_EQ(env["TRAINRUN_ERROR_FILE"], env["TORCHELASTIC_ERROR_FILE"]);
    EXPECT_NE(env["TRAINRUN_ERROR_FILE"].find(std::to_string(r) + "/error.json"), std::string::npos);
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    ports.insert(env["MASTER_PORT"]);
    run_ids.insert(env["TRAINRUN_RUN_ID"]);
  }
  EXPECT_EQ(ports.size(), 1u);
  EXPECT_EQ(run_ids.size(), 1u);
  EXPECT_NE(a.err().find("OMP_NUM_THREADS is not set"), std::string::npos);
  // PET_* variables set flags, as torchrun's do.
  setenv("PET_NPROC_PER_NODE", "2", 1);
  Agent b({"--no-python", kWorker, "env"}, "env_pet");
  unsetenv("PET_NPROC_PER_NODE");
  ASSERT_EQ(b.wait(), 0) << b.err();
  EXPECT_EQ(env_of_rank(b.out(), 1)["WORLD_SIZE"], "2");
}

TEST(Launcher, AFailureStopsTheOthersAtOnceWithARootCause) {
  const auto start = Clock::now();
  Agent a({"--nproc-per-node", "3", "--grace-period", "1", "--no-python", kWorker, "fail", "1", "3"}, "fail");
  EXPECT_EQ(a.wait(), 3) << a.err();
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(took, 0.2 + 1.0 + 1.0) << "failure to exit took " << took << " s";  // the failure, the grace, a second
  const std::string err = a.err();
  EXPECT_NE(err.find("worker group failed (attempt 1 of 1)"), std::string::npos) << err;
  EXPECT_NE(err.find("rank:      1 (local rank 1)"), std::string::npos) << err;
  EXPECT_NE(err.find("exit code: 3"), std::string::npos) << err;
  EXPECT_NE(err.find("message:   ValueError: rank 1 saw a bad batch"), std::string::npos) << err;
  EXPECT_NE(err.find("      step 7"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 0 (stopped by trainrun)"), std::string::npos) << err;
}

TEST(Launcher, RestartsTheGroupUpToTheLimit) {
  Agent ok({"--nproc-per-node", "2", "--max-restarts", "2", "--no-python", kWorker, "flaky", "2"}, "flaky_ok");
  EXPECT_EQ(ok.wait(), 0) << ok.err();
  EXPECT_NE(ok.out().find("[rank0]:attempt 2"), std::string::npos) << ok.out();
  EXPECT_NE(ok.err().find("restarting the worker group (2 of 2 restarts)"), std::string::npos) << ok.err();
  Agent no({"--nproc-per-node", "2", "--max-restarts", "1", "--no-python", kWorker, "flaky", "2"}, "flaky_no");
  EXPECT_EQ(no.wait(), 5) << no.err();
  EXPECT_NE(no.err().find("worker group failed (attempt 2 of 2)"), std::string::npos) << no.err();
}

std::vector<pid_t> wait_for_pids(const std::string& dir, int n) {
  std::vector<pid_t> pids;
  for (int i = 0; i < 2000 && static_cast<int>(pids.size()) < n; ++i) {
    pids.clear();
    for (int r = 0; r < n; ++r) {
      std::string text = read_file(dir + "/" + std::to_string(r) + ".pid");
      if (!text.empty() && text.back() == '\n') pids.push_back(std::stoi(text));
    }
    std::this_thread::sleep_for(5ms);
  }
  return pids;
}

TEST(Launcher, ForwardsSignalsAndExitsWith128PlusTheSignal) {
  const std::string dir = fresh_dir("signals");
  Agent a({"--nproc-per-node", "2", "--no-python", kWorker, "pids", dir}, "signals");
  auto pids = wait_for_pids(dir, 2);
  ASSERT_EQ(pids.size(), 2u) << a.err();
  kill(a.pid, SIGUSR1);  // a pre-emption warning: passed on, the job goes on
  for (int i = 0; i < 1000 && !(file_exists(dir + "/0.usr1") && file_exists(dir + "/1.usr1")); ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(file_exists(dir + "/0.usr1") && file_exists(dir + "/1.usr1"));
  kill(a.pid, SIGTERM);
  EXPECT_EQ(a.wait(10s), 128 + SIGTERM) << a.err();
  for (pid_t p : pids) EXPECT_TRUE(process_gone(p)) << p;
}

TEST(Launcher, AnAgentKilledWithSigkillLeavesNoWorkerBehind) {
  const std::string dir = fresh_dir("orphans");
  Agent a({"--nproc-per-node", "3", "--no-python", kWorker, "pids", dir}, "orphans");
  auto pids = wait_for_pids(dir, 3);
  ASSERT_EQ(pids.size(), 3u) << a.err();
  kill(a.pid, SIGKILL);
  a.wait(10s);
  bool all_gone = false;
  for (int i = 0; i < 400 && !all_gone; ++i) {
    all_gone = true;
    for (pid_t p : pids) all_gone = all_gone && process_gone(p);
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(all_gone);
}

TEST(Launcher, TwoJobsOnOneHostDoNotCollide) {
  Agent a({"--nproc-per-node", "2", "--no-python", kWorker, "allreduce", "20"}, "job_a");
  Agent b({"--nproc-per-node", "2", "--no-python", kWorker, "allreduce", "20"}, "job_b");
  EXPECT_EQ(a.wait(), 0) << a.err();
  EXPECT_EQ(b.wait(), 0) << b.err();
  EXPECT_NE(a.out().find("[rank1]:rank 1 of 2: 20 allreduces ok"), std::string::npos) << a.out();
  EXPECT_NE(b.out().find("[rank0]:rank 0 of 2: 20 allreduces ok"), std::string::npos) << b.out();
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(Launcher, TwoAgentsFormATwoNodeJob) {
  const std::string port = std::to_string(free_port());
  auto node = [&](int rank, const char* steps, const std::string& name) {
    return std::make_unique<Agent>(
        std::vector<std::string>{"--nnodes", "2", "--node-rank", std::to_string(rank), "--nproc-per-node", "2",
                                 "--master-addr", "127.0.0.1", "--master-port", port, "--no-python", kWorker,
                                 "allreduce", steps},
        name);
  };
  auto n0 = node(0, "10", "node0"), n1 = node(1, "10", "node1");
  EXPECT_EQ(n0->wait(), 0) << n0->err();
  EXPECT_EQ(n1->wait(), 0) << n1->err();
  EXPECT_NE(n1->out().find("[rank3]:rank 3 of 4: 10 allreduces ok"), std::string::npos) << n1->out();
  // Node 1 dies mid-job: node 0's workers fail (their peers vanished) and it
  // exits with a failure instead of hanging.
  const std::string port2 = std::to_string(free_port());
  auto m0 = std::make_unique<Agent>(
      std::vector<std::string>{"--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1", "--master-port", port2,
                               "--grace-period", "1", "--no-python", kWorker, "allreduce", "100000"},
      "dying0");
  auto m1 = std::make_unique<Agent>(
      std::vector<std::string>{"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "1", "--master-port", port2,
                               "--no-python", kWorker, "allreduce", "100000"},
      "dying1");
  std::this_thread::sleep_for(1500ms);
  kill(m1->pid, SIGKILL);
  const int rc = m0->wait(60s);
  EXPECT_NE(rc, 0) << m0->err();
  EXPECT_NE(rc, -1) << "node 0 hung after node 1 died";
  EXPECT_NE(m0->err().find("root cause"), std::string::npos) << m0->err();
}

// On node rank 1 of a 2-node job what differs between ranks and nodes shows:
// LOCAL_RANK is not RANK, GROUP_RANK is 1, the world counts both nodes.
TEST(Launcher, SecondNodeWorkersGetTheirGlobalAndLocalRanks) {
  const std::string port = std::to_string(free_port());
  auto node = [&](int rank) {
    return std::make_unique<Agent>(
        std::vector<std::string>{"--nnodes", "2", "--node-rank", std::to_string(rank), "--nproc-per-node", "2",
                                 "--master-addr", "127.0.0.1", "--master-port", port, "--no-python", kWorker, "env"},
        "env_node" + std::to_string(rank));
  };
  auto n0 = node(0), n1 = node(1);
  ASSERT_EQ(n0->wait(), 0) << n0->err();
  ASSERT_EQ(n1->wait(), 0) << n1->err();
  std::set<std::string> run_ids, ports;
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const Agent& a = r < 2 ? *n0 : *n1;
    auto env = env_of_rank(a.out(), r);
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r % 2));
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(r));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["ROLE_WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["GROUP_RANK"], std::to_string(r / 2));
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_NE(env["TRAINRUN_ERROR_FILE"].find("/" + std::to_string(r % 2) + "/error.json"), std::string::npos)
        << env["TRAINRUN_ERROR_FILE"];
    run_ids.insert(env["TRAINRUN_RUN_ID"]);
    ports.insert(env["MASTER_PORT"]);
  }
  EXPECT_EQ(run_ids.size(), 1u);
  EXPECT_EQ(ports.size(), 1u);
}

bool wait_for_text(const Agent& a, const std::string& text, std::chrono::seconds deadline = 20s) {
  const auto end = Clock::now() + deadline;
  while (Clock::now() < end) {
    if (a.err().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

std::vector<std::string> elastic_node(const std::string& endpoint, const char* steps,
                                      std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--rdzv-backend",   "c10d",
                                   "--rdzv-endpoint",  endpoint,
                                   "--nnodes",         "1:2",
                                   "--nproc-per-node", "2",
                                   "--rdzv-conf",      "last_call_timeout=0.3"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.insert(args.end(), {"--no-python", kWorker, "allreduce", steps});
  return args;
}

TEST(Launcher, ElasticJobContinuesWhenANodeDies) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  Agent a(elastic_node(endpoint, "300", {"--max-restarts", "3", "--grace-period", "1"}), "elastic_a");
  ASSERT_TRUE(wait_for_text(a, "hosting the rendezvous store")) << a.err();
  Agent b(elastic_node(endpoint, "300", {"--max-restarts", "3"}), "elastic_b");
  // Node ranks follow the order of joining, which either agent may win.
  const auto end = Clock::now() + 20s;
  auto formed = [&] {
    const std::string e = a.err();
    return e.find("round 0: this is node 0 of 2") != std::string::npos ||
           e.find("round 0: this is node 1 of 2") != std::string::npos;
  };
  while (!formed() && Clock::now() < end) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(formed()) << a.err();
  std::this_thread::sleep_for(1000ms);
  kill(b.pid, SIGKILL);  // node 1 vanishes mid-job: node 0 re-forms alone (MIN is 1) and finishes
  EXPECT_EQ(a.wait(60s), 0) << a.err();
  EXPECT_NE(a.err().find("round 1: this is node 0 of 1"), std::string::npos) << a.err();
  EXPECT_NE(a.out().find("[rank1]:rank 1 of 2: 300 allreduces ok"), std::string::npos) << a.out();
}

TEST(Launcher, ElasticJobScalesUpWhenANodeJoins) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  Agent a(elastic_node(endpoint, "400"), "scale_a");
  ASSERT_TRUE(wait_for_text(a, "round 0: this is node 0 of 1")) << a.err();
  Agent b(elastic_node(endpoint, "400"), "scale_b");
  // The newcomer waits; the running node stops its workers (not a failure)
  // and both form round 1.
  EXPECT_EQ(a.wait(60s), 0) << a.err();
  EXPECT_EQ(b.wait(60s), 0) << b.err();
  EXPECT_NE(a.err().find("a node joined or left"), std::string::npos) << a.err();
  // Node ranks follow the order of joining round 1, which the newcomer
  // (already waiting) usually wins: either place is right.
  const bool node0 = a.err().find("round 1: this is node 0 of 2") != std::string::npos;
  const bool node1 = a.err().find("round 1: this is node 1 of 2") != std::string::npos;
  EXPECT_TRUE(node0 != node1) << a.err();
  EXPECT_NE(b.err().find(node0 ? "round 1: this is node 1 of 2" : "round 1: this is node 0 of 2"), std::string::npos)
      << b.err();
  EXPECT_NE(b.out().find("of 4: 400 allreduces ok"), std::string::npos) << b.out();
}

TEST(Launcher, SigtermDuringTheRendezvousEndsTheAgentAtOnce) {
  // A pod deleted while its agent waits for the other nodes (the rest of the
  // job gone, or not yet there) must leave within its grace period, not at
  // the join timeout.
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port());
  Agent a({"--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--nnodes", "2:2", "--nproc-per-node", "1",
           "--rdzv-conf", "join_timeout=600", "--no-python", kWorker, "allreduce", "10"},
          "rdzv_sigterm");
  ASSERT_TRUE(wait_for_text(a, "hosting the rendezvous store")) << a.err();
  std::this_thread::sleep_for(300ms);  // in the rendezvous's wait for the second node
  const auto sent = Clock::now();
  kill(a.pid, SIGTERM);
  EXPECT_EQ(a.wait(10s), 128 + SIGTERM) << a.err();
  EXPECT_LT(Clock::now() - sent, 5s);
  EXPECT_NE(a.err().find("received SIGTERM (15) during the rendezvous"), std::string::npos) << a.err();
}

TEST(Launcher, RendezvousEndpointPortZeroTakesAFreePortOnTheHost) {
  // torchrun's single-node form: --rdzv-endpoint localhost:0 hosts the store on a port the kernel picks.
  Agent a({"--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "--nnodes", "1", "--nproc-per-node", "2",
           "--no-python", kWorker, "allreduce", "3"},
          "rdzv_port0");
  ASSERT_EQ(a.wait(30s), 0) << a.err();
  EXPECT_EQ(a.err().find("hosting the rendezvous store on 127.0.0.1:0"), std::string::npos) << a.err();
  EXPECT_NE(a.err().find("hosting the rendezvous store on 127.0.0.1:"), std::string::npos) << a.err();
}

TEST(Launcher, ADeathBySignalIsNamed) {
  Agent a({"--nproc-per-node", "2", "--grace-period", "1", "--no-python", kWorker, "segv"}, "segv");
  EXPECT_EQ(a.wait(), 128 + SIGSEGV) << a.err();
  EXPECT_NE(a.err().find("signal:    SIGSEGV (11)"), std::string::npos) << a.err();
  EXPECT_NE(a.err().find("rank:      0 (local rank 0)"), std::string::npos) << a.err();
}

TEST(Launcher, LogDirTeeRedirectsAndLocalRanksFilter) {
  const std::string dir = fresh_dir("logs");
  Agent a({"--nproc-per-node", "2", "--log-dir", dir, "--rdzv-id", "job7", "--tee", "3", "--local-ranks-filter", "1",
           "--no-python", kWorker, "say"},
          "logs");
  ASSERT_EQ(a.wait(), 0) << a.err();
  // The console shows local rank 1 only; the files have both, per attempt and rank, without prefixes.
  EXPECT_EQ(a.out().find("[rank0]:"), std::string::npos) << a.out();
  EXPECT_NE(a.out().find("[rank1]:out of rank 1"), std::string::npos) << a.out();
  EXPECT_NE(a.err().find("[rank1]:err of rank 1"), std::string::npos) << a.err();
  EXPECT_EQ(read_file(dir + "/job7/attempt_0/0/stdout.log"), "out of rank 0\n");
  EXPECT_EQ(read_file(dir + "/job7/attempt_0/1/stderr.log"), "err of rank 1\n");
  // --redirects 1: stdout goes to the files only.
  const std::string dir2 = fresh_dir("logs2");
  Agent b({"--nproc-per-node", "2", "--log-dir", dir2, "--rdzv-id", "job8", "--redirects", "1", "--no-python", kWorker,
           "say"},
          "logs2");
  ASSERT_EQ(b.wait(), 0) << b.err();
  EXPECT_EQ(b.out(), "");
  EXPECT_NE(b.err().find("[rank0]:err of rank 0"), std::string::npos) << b.err();
  EXPECT_EQ(read_file(dir2 + "/job8/attempt_0/1/stdout.log"), "out of rank 1\n");
}

TEST(Launcher, TheMainJobTrainsTheDigitsClassifierWithDdp) {
  Agent a({"--nproc-per-node", "2", "--no-python", "examples/train_digits", "--epochs", "15"}, "main_job");
  ASSERT_EQ(a.wait(120s), 0) << a.out() << a.err();
  const std::string out = a.out();
  const size_t at = out.find("[rank0]:held-out accuracy ");
  ASSERT_NE(at, std::string::npos) << out;
  const double accuracy = std::stod(out.substr(at + std::strlen("[rank0]:held-out accuracy ")));
  EXPECT_GE(accuracy, 0.95) << out;
  EXPECT_NE(out.find("on 2 ranks"), std::string::npos) << out;
  EXPECT_NE(out.find("checkpoint reloaded"), std::string::npos) << out;
}

TEST(Launcher, LogLinesNeverInterleave) {
  Agent a({"--nproc-per-node", "3", "--no-python", kWorker, "burst", "3000"}, "burst");
  ASSERT_EQ(a.wait(), 0) << a.err();
  std::istringstream in(a.out());
  std::string line;
  std::map<int, int> next;
  int lines = 0;
  while (std::getline(in, line)) {
    int rank = -1, i = -1;
    char tail[400] = {};
    ASSERT_EQ(std::sscanf(line.c_str(), "[rank%d]:%*d-%d-%399s", &rank, &i, tail), 3) << line;
    ASSERT_EQ(std::string(tail), std::string(300, static_cast<char>('a' + rank))) << line.substr(0, 80);
    ASSERT_EQ(i, next[rank]) << "rank " << rank << " lines out of order";
    next[rank] = i + 1;
    ++lines;
  }
  EXPECT_EQ(lines, 9000);
}

TEST(Launcher, BadFlagsExitWithTwoAndOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--nproc-per-node", "zero", "x.py"},
           {"--bogus", "x.py"},
           {"--nnodes", "3:2", "x.py"},
           {"--nproc-per-node", "2"},
           {"--rdzv-backend", "etcd", "x.py"},
           {"--rdzv-backend", "c10d", "x.py"},
           {"--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-conf", "join_timeout=soon", "x.py"}}) {
    Agent a(args, "bad");
    EXPECT_EQ(a.wait(), 2) << args[0];
    std::string err = a.err();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_EQ(err.rfind("trainrun: ", 0), 0u) << err;
  }
  // One worker per GPU: without one, the reason is the line.
  if (const GpuCount gpus = count_gpus(); gpus.count == 0) {
    Agent gpu({"--nproc-per-node", "gpu", "x.py"}, "gpu");
    EXPECT_EQ(gpu.wait(), 2);
    EXPECT_FALSE(gpus.reason.empty());
    EXPECT_NE(gpu.err().find("--nproc-per-node gpu: " + gpus.reason), std::string::npos) << gpu.err();
  }
  Agent missing({"--no-python", "/nonexistent/program"}, "missing");
  EXPECT_EQ(missing.wait(), 127);
  EXPECT_NE(missing.err().find("cannot run '/nonexistent/program'"), std::string::npos) << missing.err();
}

}  // namespace
}  // namespace trainrun
