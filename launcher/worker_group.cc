#include "launcher/worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "launcher/launch_options.h"

extern char** environ;

namespace trainrun {
namespace {

using Clock = std::chrono::steady_clock;

void make_dirs(const std::string& path) {
  std::string partial;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    partial = path.substr(0, slash == std::string::npos ? path.size() : slash);
    if (!partial.empty()) mkdir(partial.c_str(), 0755);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
}

// The agent's environment with `overrides` replacing (or adding) their names.
std::vector<std::string> environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (!overrides.count(name)) env.push_back(entry);
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

std::vector<std::string> with_local_rank(std::vector<std::string> argv, int local_rank) {
  const std::string macro = kLocalRankMacro;
  for (std::string& a : argv)
    for (size_t at = a.find(macro); at != std::string::npos; at = a.find(macro, at))
      a.replace(at, macro.size(), std::to_string(local_rank));
  return argv;
}

WorkerGroup::WorkerGroup(const WorkerGroupSpec& spec) {
  try {
    start(spec);
  } catch (const DistBackendError&) {
    for (Worker& w : workers_) w.process->signal(SIGKILL);
    for (Worker& w : workers_)
      while (!w.process->poll()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    throw;
  }
}

void WorkerGroup::start(const WorkerGroupSpec& spec) {
  for (int lr = 0; lr < spec.nproc; ++lr) {
    Worker w;
    w.local_rank = lr;
    w.rank = spec.node_rank * spec.nproc + lr;
    // Per local rank, as torchrun lays out attempt_N/LOCAL_RANK/error.json.
    make_dirs(fmt::format("{}/{}", spec.attempt_dir, lr));
    w.error_file = fmt::format("{}/{}/error.json", spec.attempt_dir, lr);
    std::map<std::string, std::string> env = spec.env;
    env["RANK"] = env["ROLE_RANK"] = std::to_string(w.rank);
    env["LOCAL_RANK"] = std::to_string(lr);
    // Progress bars: the worker's stdout is a pipe, but what it reaches may be a terminal (log_router.h).
    if (isatty(1) && spec.json_log == nullptr) env["TRAINRUN_CONSOLE_IS_TTY"] = "1";
    env["TRAINRUN_RESTART_COUNT"] = env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(spec.restart_count);
    env["TRAINRUN_ERROR_FILE"] = env["TORCHELASTIC_ERROR_FILE"] = w.error_file;
    int out = -1, err = -1;
    w.process = std::make_unique<WorkerProcess>(WorkerSpec{with_local_rank(spec.argv, lr), environment(env)}, &out,
                                                &err);
    const bool shown =
        spec.shown_local_ranks.empty() ||
        std::find(spec.shown_local_ranks.begin(), spec.shown_local_ranks.end(), lr) != spec.shown_local_ranks.end();
    const int redirected = stream_mask_for(spec.redirects, lr, "--redirects"),
              teed = stream_mask_for(spec.tee, lr, "--tee");
    const std::string prefix = fmt::format("[rank{}]:", w.rank);
    for (int stream : {1, 2}) {
      const int bit = stream;  // 1: stdout, 2: stderr
      int file_fd = -1;
      if ((redirected | teed) & bit) {
        std::string dir = fmt::format("{}/{}/attempt_{}/{}", spec.log_dir, spec.run_id, spec.attempt, lr);
        make_dirs(dir);
        file_fd = ::open((dir + (stream == 1 ? "/stdout.log" : "/stderr.log")).c_str(),
                         O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      }
      const bool console = shown && !((redirected & bit) && !(teed & bit));
      LogRouter::LineFormat format = [prefix](const std::string& line) { return prefix + line + "\n"; };
      if (spec.json_log != nullptr) {
        const JsonLogContext ctx = *spec.json_log;
        const long pid = w.process->pid();
        format = [ctx, rank = w.rank, lr, pid, stream](const std::string& line) {
          return json_worker_line(ctx, rank, lr, pid, stream == 2, line);
        };
      }
      const bool live_status = console && spec.json_log == nullptr && isatty(stream);
      router_.add(stream == 1 ? out : err, std::move(format), console ? stream : -1, file_fd, live_status);
    }
    workers_.push_back(std::move(w));
  }
}

GroupOutcome WorkerGroup::watch(int signal_fd, const WatchHooks& hooks) {
  GroupOutcome outcome;
  std::optional<Clock::time_point> kill_at;
  Clock::time_point next_membership_check = Clock::now();
  auto stop_all = [&](int sig) {
    if (hooks.on_stopping) hooks.on_stopping();
    for (Worker& w : workers_)
      if (w.process->running()) {
        w.process->signal(sig);
        w.stopped_by_us = true;
      }
    if (!kill_at) kill_at = Clock::now() + seconds(hooks.grace_period);
  };
  for (;;) {
    bool any_running = false;
    for (Worker& w : workers_) {
      if (w.reaped) continue;
      if (!w.process->poll()) {
        any_running = true;
        continue;
      }
      w.reaped = true;
      const bool drained = hooks.drain_deadline && hooks.drain_deadline() && w.process->term_signal() == 0 &&
                           w.process->exit_code() == kDrainExitCode;
      const bool failed = w.process->exit_code() != 0 && !drained;
      std::string cause;
      if (!failed) {
        w.stopped_by_us = false;  // it finished on its own
      } else if (!w.stopped_by_us) {
        // A failure of its own (not one of the workers we were stopping).
        outcome.failures.push_back(Failure{w.local_rank, w.rank, w.process->pid(), w.process->exit_code(),
                                           w.process->term_signal(), w.process->exited_at(),
                                           read_worker_error(w.error_file)});
        if (outcome.failures.back().error) cause = outcome.failures.back().error->message;
        if (!outcome.terminate_signal && !kill_at && hooks.before_stopping_on_failure)
          hooks.before_stopping_on_failure();
        if (!outcome.terminate_signal) stop_all(SIGTERM);
      }
      if (hooks.on_exit) hooks.on_exit(w, failed && !w.stopped_by_us, cause);
    }
    if (!any_running) break;
    if (hooks.must_reform && !kill_at && Clock::now() >= next_membership_check) {
      next_membership_check = Clock::now() + seconds(hooks.monitor_interval);
      if (hooks.must_reform()) {
        outcome.reform = true;
        stop_all(SIGTERM);
      }
    }
    if (hooks.drain_deadline && !kill_at) {
      if (auto deadline = hooks.drain_deadline(); deadline && Clock::now() >= *deadline) {
        log_line("", "the drain timeout passed: stopping the workers that have not exited");
        stop_all(SIGTERM);
      }
    }
    if (kill_at && Clock::now() >= *kill_at) {
      for (Worker& w : workers_) w.process->signal(SIGKILL);
    }
    pollfd p{signal_fd, POLLIN, 0};
    const int wait_ms = static_cast<int>(hooks.monitor_interval * 1000);
    if (poll(&p, 1, kill_at ? std::min(wait_ms, 20) : wait_ms) > 0) {
      signalfd_siginfo info{};
      while (::read(signal_fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        const int sig = static_cast<int>(info.ssi_signo);
        if (sig == SIGCHLD) continue;
        // USR1/USR2 (pre-emption warnings) pass through; stop signals also end the job.
        for (Worker& w : workers_) w.process->signal(sig);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
          if (!outcome.terminate_signal)
            log_line("", fmt::format("received {}: stopping the workers", signal_name(sig)));
          outcome.terminate_signal = sig;
          if (hooks.on_stop_signal) hooks.on_stop_signal(sig);
          stop_all(sig);
        }
      }
    }
  }
  router_.drain(std::chrono::seconds(2));
  return outcome;
}

std::vector<int> WorkerGroup::stopped_ranks() const {
  std::vector<int> ranks;
  for (const Worker& w : workers_)
    if (w.stopped_by_us) ranks.push_back(w.rank);
  return ranks;
}

}  // namespace trainrun
