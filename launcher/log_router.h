#pragma once
// Routes workers' stdout and stderr: each line is formatted for the console
// (its rank's prefix "[rank3]:", or a JSON object under --log-format json)
// and goes out in one write, so lines of different workers never interleave
// mid-line; per-rank files take a copy (--tee) or the stream itself
// (--redirects). One thread polls every pipe.
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace trainrun {

class LogRouter {
 public:
  LogRouter();
  ~LogRouter();
  LogRouter(const LogRouter&) = delete;
  LogRouter& operator=(const LogRouter&) = delete;

  // A worker's line as the console shows it, newline included.
  using LineFormat = std::function<std::string(const std::string& line)>;
  // Takes ownership of `pipe_fd` (a worker stream's read end) and of
  // `file_fd` (-1: no file). console_fd: 1, 2, or -1 to show nothing.
  void add(int pipe_fd, LineFormat format, int console_fd, int file_fd);
  // Waits until every stream added so far reached end of file (its writers
  // exited), or the timeout; streams still open are then dropped.
  void drain(std::chrono::milliseconds timeout);

 private:
  struct Stream {
    int fd;
    LineFormat format;
    int console_fd, file_fd;
    std::string partial;
  };
  void loop();
  void emit(Stream& s, const char* data, size_t n, bool final);
  void close_stream(Stream& s);

  std::mutex mu_;
  std::vector<Stream> streams_, added_;
  int wake_[2] = {-1, -1};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trainrun
