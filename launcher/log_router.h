#pragma once
// Routes workers' stdout and stderr: each line is formatted for the console
// (its rank's prefix "[rank3]:", or a JSON object under --log-format json)
// and goes out in one write, so lines of different workers never interleave
// mid-line; per-rank files take a copy (--tee) or the stream itself
// (--redirects). One thread polls every pipe.
//
// A segment ended by a lone carriage return is a status line (a progress
// bar's idiom): on a terminal console it is drawn at once over the current
// line (and the next line of any worker replaces it); elsewhere, and in the
// files, it is dropped. Workers learn that the console is a terminal from
// TRAINRUN_CONSOLE_IS_TTY=1.
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
  // live_status: the console is a terminal, so status lines are drawn.
  void add(int pipe_fd, LineFormat format, int console_fd, int file_fd, bool live_status = false);
  // Waits until every stream added so far reached end of file (its writers
  // exited), or the timeout; streams still open are then dropped.
  void drain(std::chrono::milliseconds timeout);

 private:
  struct Stream {
    int fd;
    LineFormat format;
    int console_fd, file_fd;
    bool live_status;
    std::string partial;
  };
  void write_console(int fd, const std::string& text, bool status);
  void loop();
  void emit(Stream& s, const char* data, size_t n, bool final);
  void close_stream(Stream& s);

  std::mutex mu_;
  std::vector<Stream> streams_, added_;
  int wake_[2] = {-1, -1};
  bool status_shown_ = false;  // a status line is on the terminal (the next output clears it first)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace trainrun
