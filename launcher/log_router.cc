#include "launcher/log_router.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace trainrun {
namespace {

constexpr size_t kMaxLine = 64 << 10;  // a longer line without a newline is cut here

void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // console or file gone: drop, never block the workers
    data += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

LogRouter::LogRouter() {
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { loop(); });
}

LogRouter::~LogRouter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  thread_.join();
  for (Stream& s : streams_) close_stream(s);
  for (Stream& s : added_) close_stream(s);
  if (wake_[0] >= 0) close(wake_[0]);
  if (wake_[1] >= 0) close(wake_[1]);
}

void LogRouter::add(int pipe_fd, LineFormat format, int console_fd, int file_fd, bool live_status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    added_.push_back(Stream{pipe_fd, std::move(format), console_fd, file_fd, live_status, {}});
  }
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
}

void LogRouter::drain(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (streams_.empty() && added_.empty()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void LogRouter::write_console(int fd, const std::string& text, bool status) {
  // A status line is drawn over the current terminal line ("\r" and erase to its end), and whatever comes
  // next erases it first: a terminal shows at most one, always the latest.
  static const std::string kEraseLine = "\r\x1b[K";
  std::string out = status_shown_ || status ? kEraseLine + text : text;
  status_shown_ = status;
  write_all(fd, out.data(), out.size());
}

void LogRouter::emit(Stream& s, const char* data, size_t n, bool final) {
  s.partial.append(data, n);
  size_t start = 0;
  while (start < s.partial.size()) {
    const size_t stop = s.partial.find_first_of("\r\n", start);
    const bool too_long = stop == std::string::npos && s.partial.size() - start >= kMaxLine;
    if (stop == std::string::npos && !too_long && !final) break;
    // "\r\n" ends a line; a lone "\r" ends a status line (undecided until the next byte arrives).
    const bool cr = stop != std::string::npos && s.partial[stop] == '\r';
    if (cr && stop + 1 == s.partial.size() && !final) break;
    const bool status = cr && (stop + 1 == s.partial.size() || s.partial[stop + 1] != '\n');
    const size_t end = stop == std::string::npos ? (too_long ? start + kMaxLine : s.partial.size()) : stop;
    std::string line = s.partial.substr(start, end - start);
    if (status) {
      if (s.console_fd >= 0 && s.live_status) {
        std::string shown = s.format(line);
        if (!shown.empty() && shown.back() == '\n') shown.pop_back();
        write_console(s.console_fd, shown, true);
      }
    } else {
      if (s.console_fd >= 0) write_console(s.console_fd, s.format(line), false);
      if (s.file_fd >= 0) {
        line.push_back('\n');
        write_all(s.file_fd, line.data(), line.size());
      }
    }
    start = stop == std::string::npos ? end : stop + (cr && !status ? 2 : 1);
  }
  s.partial.erase(0, start);
}

void LogRouter::close_stream(Stream& s) {
  if (s.fd >= 0) close(s.fd);
  if (s.file_fd >= 0) close(s.file_fd);
  s.fd = s.file_fd = -1;
}

void LogRouter::loop() {
  std::vector<pollfd> fds;
  char buf[65536];
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Stream& s : added_) streams_.push_back(std::move(s));
      added_.clear();
      if (stopping_ && streams_.empty()) return;
    }
    fds.clear();
    fds.push_back(pollfd{wake_[0], POLLIN, 0});
    for (Stream& s : streams_) fds.push_back(pollfd{s.fd, POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), stopping_ ? 50 : 1000);
    if (ready < 0 && errno != EINTR) return;
    // Being destroyed and nothing more arrived: whatever still holds a pipe
    // open (a worker's orphaned child) is not waited for.
    if (stopping_ && ready == 0) return;
    if (fds[0].revents & POLLIN)
      while (::read(wake_[0], buf, sizeof(buf)) > 0) {
      }
    std::vector<size_t> finished;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Stream& s = streams_[i - 1];
      ssize_t n = ::read(s.fd, buf, sizeof(buf));
      if (n > 0) {
        emit(s, buf, static_cast<size_t>(n), false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        emit(s, "", 0, true);
        finished.push_back(i - 1);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = finished.rbegin(); it != finished.rend(); ++it) {
      close_stream(streams_[*it]);
      streams_.erase(streams_.begin() + static_cast<long>(*it));
    }
    if (stopping_ && streams_.empty() && added_.empty()) return;
  }
}

}  // namespace trainrun
