#pragma once
// One worker process: started with fork + exec in its own process group,
// tied to the agent with PR_SET_PDEATHSIG (it gets SIGKILL if the agent dies,
// even by SIGKILL), its stdout and stderr on pipes the agent reads.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace trainrun {

struct WorkerSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value"
};

class WorkerProcess {
 public:
  // Starts it; the read ends of its stdout and stderr pipes are returned
  // through out_fd and err_fd. Throws DistBackendError naming the program
  // when it cannot be started (not found, not executable).
  WorkerProcess(const WorkerSpec& spec, int* out_fd, int* err_fd);

  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // Signals the worker's whole process group (its own children too).
  void signal(int sig) const;
  // Non-blocking reap; true once it has exited (then exit_code/term_signal are set).
  bool poll();
  int exit_code() const { return exit_code_; }      // -1 when killed by a signal
  int term_signal() const { return term_signal_; }  // 0 when it exited
  std::chrono::system_clock::time_point exited_at() const { return exited_at_; }

 private:
  pid_t pid_ = -1;
  bool running_ = false;
  int exit_code_ = -1, term_signal_ = 0;
  std::chrono::system_clock::time_point exited_at_;
};

}  // namespace trainrun
