#include "launcher/failure_report.h"

#include <fmt/format.h>
#include <string.h>
#include <unistd.h>

#include <ctime>

#include "base/log.h"

namespace trainrun {
namespace {

std::string iso_time(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{} ({})", abbrev, sig) : fmt::format("signal {}", sig);
}

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

const Failure& root_cause(const std::vector<Failure>& failures) {
  const Failure* best = nullptr;
  auto key = [](const Failure& f) {
    return f.error && f.error->timestamp > 0 ? f.error->timestamp
                                             : std::chrono::duration<double>(f.when.time_since_epoch()).count();
  };
  for (const Failure& f : failures)
    if (best == nullptr || key(f) < key(*best)) best = &f;
  return *best;
}

void print_failure_summary(const std::vector<Failure>& failures, const std::vector<int>& stopped_ranks, int attempt,
                           int max_restarts) {
  const Failure& f = root_cause(failures);
  std::string text = fmt::format("worker group failed (attempt {} of {})\n", attempt + 1, max_restarts + 1);
  text += "  root cause (first failure):\n";
  text += fmt::format("    rank:      {} (local rank {}) on {}, pid {}\n", f.rank, f.local_rank, this_host(), f.pid);
  text += f.signal != 0 ? fmt::format("    signal:    {}\n", signal_name(f.signal))
                        : fmt::format("    exit code: {}\n", f.exit_code);
  text += fmt::format("    time:      {}\n", iso_time(f.when));
  if (f.error) {
    text += fmt::format("    message:   {}\n", f.error->message);
    if (!f.error->traceback.empty()) {
      text += "    traceback:\n";
      size_t start = 0;
      const std::string& tb = f.error->traceback;
      while (start < tb.size()) {
        size_t nl = tb.find('\n', start);
        text += "      " + tb.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
    }
  } else {
    text += "    message:   (no error file; see the worker's output above)\n";
  }
  std::vector<std::string> others;
  for (const Failure& g : failures)
    if (&g != &f)
      others.push_back(fmt::format("rank {} ({})", g.rank,
                                   g.signal != 0 ? signal_name(g.signal) : fmt::format("exit code {}", g.exit_code)));
  for (int rank : stopped_ranks) others.push_back(fmt::format("rank {} (stopped by trainrun)", rank));
  if (!others.empty()) text += fmt::format("  other workers: {}", fmt::join(others, ", "));
  log_line("", text);
}

}  // namespace trainrun
