#include "launcher/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace trainrun {

WorkerProcess::WorkerProcess(const WorkerSpec& spec, int* out_fd, int* err_fd) {
  TR_CHECK(!spec.argv.empty(), ValueError, "worker: empty command line");
  int out[2], err[2], exec_status[2];
  TR_CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0 && pipe2(exec_status, O_CLOEXEC) == 0,
           DistBackendError, "worker: cannot create pipes: {}", std::strerror(errno));
  // Everything the child needs is built before fork (only async-signal-safe
  // calls happen between fork and exec).
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  TR_CHECK(pid >= 0, DistBackendError, "worker: fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    // Die with the agent, even if it is SIGKILLed; and if it already died
    // between fork and here, do not run orphaned.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    setpgid(0, 0);
    // Signals the agent blocks (to read them from a signalfd) must not stay
    // blocked in the worker.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    (void)!::write(exec_status[1], &e, sizeof(e));
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so signal() works at once
  close(out[1]);
  close(err[1]);
  close(exec_status[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_status[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_status[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    waitpid(pid, nullptr, 0);
    close(out[0]);
    close(err[0]);
    throw DistBackendError(fmt::format("cannot run '{}': {}", spec.argv[0], std::strerror(exec_errno)));
  }
  pid_ = pid;
  running_ = true;
  *out_fd = out[0];
  *err_fd = err[0];
}

void WorkerProcess::signal(int sig) const {
  if (running_) kill(-pid_, sig);
}

bool WorkerProcess::poll() {
  if (!running_) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  running_ = false;
  exited_at_ = std::chrono::system_clock::now();
  if (WIFEXITED(status)) {
    exit_code_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    term_signal_ = WTERMSIG(status);
  }
  // Whatever the worker left running in its group goes with it.
  kill(-pid_, SIGKILL);
  return true;
}

}  // namespace trainrun
