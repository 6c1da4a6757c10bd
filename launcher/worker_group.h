#pragma once
// One attempt's local workers: started together with torchrun's
// environment and their output routed, then watched until every one has
// exited. The first failure, a stop signal to the agent or a re-formed
// elastic group stops the rest: SIGTERM, then SIGKILL after the grace
// period.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/failure_report.h"
#include "launcher/json_log.h"
#include "launcher/log_router.h"
#include "launcher/worker_process.h"

namespace trainrun {

// The exit code of a worker that checkpointed and asks to be restarted
// elsewhere (Kubeflow's "retryable" convention); the agent's Drain asks for it.
constexpr int kDrainExitCode = 138;

struct Worker {
  int local_rank, rank;
  std::unique_ptr<WorkerProcess> process;
  std::string error_file;
  bool stopped_by_us = false;  // the agent signalled it to stop
  bool reaped = false;
};

// In a worker's command line, its local rank (torchrun's ${local_rank} macro): torch.distributed.launch passes
// --local-rank=${local_rank}.
constexpr const char* kLocalRankMacro = "${local_rank}";
// argv with every kLocalRankMacro replaced by local_rank.
std::vector<std::string> with_local_rank(std::vector<std::string> argv, int local_rank);

struct WorkerGroupSpec {
  std::vector<std::string> argv;           // the program and its arguments
  std::map<std::string, std::string> env;  // what every worker gets (WORLD_SIZE, MASTER_ADDR, ...)
  int nproc = 1, node_rank = 0, restart_count = 0, attempt = 0;
  std::string attempt_dir;                   // error files: attempt_dir/LOCAL_RANK/error.json
  std::string log_dir, run_id;               // --log-dir files: log_dir/run_id/attempt_N/LOCAL_RANK/
  std::string redirects = "0", tee = "0";    // --redirects / --tee
  std::vector<int> shown_local_ranks;        // empty: all
  const JsonLogContext* json_log = nullptr;  // --log-format json: workers' lines as JSON objects
};

// What watch() saw.
struct GroupOutcome {
  std::vector<Failure> failures;  // workers that failed on their own (not those the agent stopped)
  bool reform = false;            // stopped because the elastic group must re-form
  int terminate_signal = 0;       // a stop signal the agent received (SIGINT, SIGTERM, SIGHUP)
};

// How the watch talks to the agent.
struct WatchHooks {
  double monitor_interval = 0.1;            // seconds between checks (SIGCHLD wakes it sooner)
  double grace_period = 5.0;                // seconds from SIGTERM to SIGKILL
  std::function<bool()> must_reform;        // elastic: asked every monitor_interval; may be empty
  std::function<void()> on_stopping;        // the agent starts stopping the group
  std::function<void(int)> on_stop_signal;  // the agent received SIGINT, SIGTERM or SIGHUP
  // A worker failed on its own and the others are about to be stopped: the
  // agent may first collect what they can tell (flight records).
  std::function<void()> before_stopping_on_failure;
  // Draining (the agent's Drain call): exiting with kDrainExitCode is not a
  // failure, and when the deadline passes the workers still running are
  // stopped. Empty, or returning nullopt: not draining.
  std::function<std::optional<std::chrono::steady_clock::time_point>()> drain_deadline;
  // A worker exited: whether it failed on its own, and its error file's message.
  std::function<void(const Worker&, bool failed_on_its_own, const std::string& cause)> on_exit;
};

class WorkerGroup {
 public:
  // Starts every local worker. Throws DistBackendError (after killing those
  // already started) when one cannot be started.
  explicit WorkerGroup(const WorkerGroupSpec& spec);
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  const std::vector<Worker>& workers() const { return workers_; }
  // Watches until every worker has exited, reading the agent's signals from
  // signal_fd (forwarded to the workers), then drains their output.
  GroupOutcome watch(int signal_fd, const WatchHooks& hooks);
  // Global ranks of the workers the agent stopped.
  std::vector<int> stopped_ranks() const;

 private:
  void start(const WorkerGroupSpec& spec);
  LogRouter router_;
  std::vector<Worker> workers_;
};

}  // namespace trainrun
