// A worker for tests/launcher/launcher_test.cc, started by trainrun:
//   launcher_worker env                print the launcher's variables, one per line
//   launcher_worker fail RANK CODE     RANK records an error and exits CODE after 200 ms; others sleep 60 s
//   launcher_worker flaky N            fail (exit 5) until TRAINRUN_RESTART_COUNT reaches N
//   launcher_worker pids DIR           write DIR/<rank>.pid, DIR/<rank>.usr1 on SIGUSR1; exit 0 on SIGTERM; sleep
//   launcher_worker burst LINES        print LINES long lines to stdout as fast as possible
//   launcher_worker allreduce STEPS    init_process_group (env://), STEPS allreduces, check the sums
//   launcher_worker segv               rank 0 dies of SIGSEGV; the others sleep 60 s
//   launcher_worker say                print one line to stdout and one to stderr
//   launcher_worker idle DIR           init_process_group, 3 allreduces, write DIR/ready.<rank>, then wait in
//                                      waiting_in_a_named_function until DIR/go exists
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "c10d/distributed.h"
#include "launcher/error_file.h"
#include "tensor/ops.h"

using namespace trainrun;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "<unset>" : v;
}

volatile sig_atomic_t g_usr1 = 0, g_term = 0;

}  // namespace

// Exported (the binary links with -rdynamic) so that native stacks name it.
extern "C" __attribute__((noinline)) void waiting_in_a_named_function(const std::string& go) {
  while (access(go.c_str(), F_OK) != 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const int rank = std::atoi(env("RANK").c_str());
  if (mode == "env") {
    for (const char* name : {"RANK",
                             "LOCAL_RANK",
                             "WORLD_SIZE",
                             "LOCAL_WORLD_SIZE",
                             "GROUP_RANK",
                             "GROUP_WORLD_SIZE",
                             "ROLE_RANK",
                             "ROLE_NAME",
                             "ROLE_WORLD_SIZE",
                             "MASTER_ADDR",
                             "MASTER_PORT",
                             "TRAINRUN_RESTART_COUNT",
                             "TRAINRUN_MAX_RESTARTS",
                             "TRAINRUN_RUN_ID",
                             "TRAINRUN_ERROR_FILE",
                             "TORCHELASTIC_RESTART_COUNT",
                             "TORCHELASTIC_MAX_RESTARTS",
                             "TORCHELASTIC_RUN_ID",
                             "TORCHELASTIC_ERROR_FILE",
                             "TORCHELASTIC_USE_AGENT_STORE",
                             "OMP_NUM_THREADS"})
      std::printf("%s=%s\n", name, env(name).c_str());
    return 0;
  }
  if (mode == "fail" && argc == 4) {
    if (rank == std::atoi(argv[2])) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      record_worker_error("ValueError: rank " + std::to_string(rank) + " saw a bad batch", "step 7\nlayer 2");
      return std::atoi(argv[3]);
    }
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  if (mode == "flaky" && argc == 3) {
    const int attempt = std::atoi(env("TRAINRUN_RESTART_COUNT").c_str());
    std::printf("attempt %d\n", attempt);
    return attempt >= std::atoi(argv[2]) ? 0 : 5;
  }
  if (mode == "pids" && argc == 3) {
    const std::string dir = argv[2];
    signal(SIGUSR1, [](int) { g_usr1 = 1; });
    signal(SIGTERM, [](int) { g_term = 1; });
    std::ofstream(dir + "/" + std::to_string(rank) + ".pid") << getpid() << "\n";
    for (int i = 0; i < 60000 && !g_term; ++i) {
      if (g_usr1) {
        std::ofstream(dir + "/" + std::to_string(rank) + ".usr1") << "1\n";
        g_usr1 = 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return 0;
  }
  if (mode == "burst" && argc == 3) {
    const int lines = std::atoi(argv[2]);
    std::string tail(300, static_cast<char>('a' + rank % 26));
    for (int i = 0; i < lines; ++i) std::printf("%d-%d-%s\n", rank, i, tail.c_str());
    return 0;
  }
  if (mode == "allreduce" && argc == 3) {
    try {
      c10d::InitOptions o;
      o.timeout = std::chrono::seconds(20);
      c10d::init_process_group(o);
      auto pg = c10d::default_group();
      const int steps = std::atoi(argv[2]);
      for (int s = 0; s < steps; ++s) {
        Tensor t = full({1024}, static_cast<double>(pg->rank() + s));
        pg->allreduce(t)->wait();
        const double want = pg->size() * (pg->size() - 1) / 2.0 + pg->size() * s;
        if (t.select(0, 0).item<double>() != want) {
          std::fprintf(stderr, "rank %d: allreduce gave %f, want %f\n", rank, t.select(0, 0).item<double>(), want);
          return 1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::printf("rank %d of %d: %d allreduces ok\n", pg->rank(), pg->size(), steps);
      c10d::destroy_process_group();
    } catch (const std::exception& e) {
      record_worker_error(e.what());
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      return 1;
    }
    return 0;
  }
  if (mode == "idle" && argc == 3) {
    c10d::init_process_group(c10d::InitOptions{});
    Tensor t = full({4}, 1.0);
    for (int s = 0; s < 3; ++s) c10d::default_group()->allreduce(t)->wait();
    std::ofstream(std::string(argv[2]) + "/ready." + std::to_string(rank)) << "ready\n";
    waiting_in_a_named_function(std::string(argv[2]) + "/go");
    c10d::destroy_process_group();
    return 0;
  }
  if (mode == "segv") {
    if (rank == 0) raise(SIGSEGV);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  if (mode == "say") {
    std::printf("out of rank %d\n", rank);
    std::fprintf(stderr, "err of rank %d\n", rank);
    return 0;
  }
  std::fprintf(stderr, "launcher_worker: bad arguments\n");
  return 2;
}
