#include "base/log.h"

#include <unistd.h>

#include <cerrno>
#include <string>

namespace trainrun {
namespace {

LogLineFormat& line_format() {
  static LogLineFormat format;
  return format;
}

}  // namespace

void set_log_line_format(LogLineFormat format) { line_format() = std::move(format); }

void log_line(std::string_view who, std::string_view line) {
  std::string text;
  if (line_format()) {
    text = line_format()(who, line);
  } else {
    text.reserve(who.size() + line.size() + 12);
    text.append("trainrun");
    if (!who.empty()) text.append(" ").append(who);
    text.append(": ").append(line);
  }
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  // One write per line; a short write (a full pipe) continues where it stopped.
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: nothing better to do with a log line
    done += static_cast<size_t>(n);
  }
}

}  // namespace trainrun
