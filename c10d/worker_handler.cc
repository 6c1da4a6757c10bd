#include "c10d/worker_handler.h"

#include <cxxabi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "c10d/flight_recorder.h"

namespace trainrun {
namespace c10d {
namespace {

constexpr int kMaxFrames = 64;

// One thread's stack at a time: the signalled thread fills these, the asking thread reads them.
void* g_frames[kMaxFrames];
std::atomic<int> g_depth{0};
std::atomic<bool> g_captured{false};
std::atomic<long> g_captured_tid{0};  // which thread filled them (a late answer is told apart)

void capture_stack(int) {
  const int saved_errno = errno;
  g_depth.store(backtrace(g_frames, kMaxFrames), std::memory_order_relaxed);
  g_captured_tid.store(::syscall(SYS_gettid), std::memory_order_relaxed);
  g_captured.store(true, std::memory_order_release);
  errno = saved_errno;
}

int stack_signal() { return SIGRTMIN + 7; }

std::string thread_name(long tid) {
  std::ifstream in(fmt::format("/proc/self/task/{}/comm", tid));
  std::string name;
  std::getline(in, name);
  return name;
}

// "function+0x1f (libfoo.so)", demangled where the symbol table names it.
std::string describe_frame(void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0) return fmt::format("{}", address);
  std::string where = info.dli_fname ? info.dli_fname : "?";
  where = where.substr(where.rfind('/') + 1);
  if (info.dli_sname == nullptr) return fmt::format("{} ({})", address, where);
  int status = 0;
  char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : info.dli_sname;
  std::free(demangled);
  const auto offset = static_cast<const char*>(address) - static_cast<const char*>(info.dli_saddr);
  return fmt::format("{}+{:#x} ({})", name, offset, where);
}

std::vector<long> thread_ids() {
  std::vector<long> tids;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') tids.push_back(std::strtol(e->d_name, nullptr, 10));
    ::closedir(d);
  }
  return tids;
}

// One request line ("stacks" or "flight"), then the answer; the client closes.
void serve(int listener) {
  for (;;) {
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR) continue;
      return;
    }
    // A client that says nothing, or stops reading, does not hold the handler up.
    timeval patience{2, 0};
    ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
    ::setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof(patience));
    std::string request;
    char c;
    while (request.size() < 64 && ::recv(conn, &c, 1, 0) == 1 && c != '\n') request.push_back(c);
    std::string answer;
    if (request == "stacks") {
      answer = native_stacks();
    } else if (request == "flight") {
      answer = FlightRecorder::global().dump_json("the launcher's agent asked (GetFlightRecord)");
    } else {
      answer = fmt::format("unknown request '{}' (expected flight or stacks)", request);
    }
    size_t sent = 0;
    while (sent < answer.size()) {
      const ssize_t n = ::send(conn, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::close(conn);
  }
}

bool answers(const sockaddr_un& addr) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

}  // namespace

std::string native_stacks() {
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> lock(one_at_a_time);
  static const bool installed = [] {
    void* warm[1];
    backtrace(warm, 1);  // loads the unwinder now: the signal handler must not
    struct sigaction sa {};
    sa.sa_handler = capture_stack;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(stack_signal(), &sa, nullptr) == 0;
  }();
  const long self = ::syscall(SYS_gettid);
  std::string out;
  for (long tid : thread_ids()) {
    if (tid == self) continue;  // this handler's own thread
    out += fmt::format("Thread {} \"{}\" (pid {}):\n", tid, thread_name(tid), ::getpid());
    g_captured.store(false);
    if (!installed || ::syscall(SYS_tgkill, ::getpid(), tid, stack_signal()) != 0) {
      out += "  (could not signal the thread)\n\n";
      continue;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    auto answered = [&] {
      return g_captured.load(std::memory_order_acquire) && g_captured_tid.load(std::memory_order_relaxed) == tid;
    };
    while (!answered() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!answered()) {
      out += "  (no answer within 200 ms: the thread blocks the signal)\n\n";
      continue;
    }
    const int depth = g_depth.load();
    // Frame 0 is capture_stack itself, frame 1 the signal trampoline.
    for (int i = 2; i < depth; ++i) out += fmt::format("  #{} {}\n", i - 2, describe_frame(g_frames[i]));
    out += "\n";
  }
  return out;
}

void start_worker_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* dir = std::getenv("TRAINRUN_STACKS_DIR");
    const char* rank = std::getenv("RANK");
    if (dir == nullptr || rank == nullptr || *dir == '\0') return;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = fmt::format("{}/rank{}.sock", dir, rank);
    if (path.size() >= sizeof(addr.sun_path)) return;
    std::strcpy(addr.sun_path, path.c_str());
    if (answers(addr)) return;  // a Python handler (or our parent's) has it
    ::unlink(path.c_str());     // left by this rank's worker of an earlier attempt
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 4) != 0) {
      ::close(fd);
      return;
    }
    std::thread(serve, fd).detach();  // lives as long as the process
  });
}

}  // namespace c10d
}  // namespace trainrun
