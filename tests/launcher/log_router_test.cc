// LogRouter: whole lines with their prefix; a lone carriage return ends a
// status line, drawn over the current line on a terminal console (and erased
// by whatever comes next), dropped elsewhere and in the files; "\r\n" ends an
// ordinary line.
#include "launcher/log_router.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace trainrun {
namespace {

struct Routed {
  std::string console, file;
};

// Writes `chunks` (one write each) into a worker pipe routed with live_status, returns what arrived.
Routed route(const std::vector<std::string>& chunks, bool live_status) {
  int worker[2], console[2];
  EXPECT_EQ(pipe(worker), 0);
  EXPECT_EQ(pipe2(console, O_NONBLOCK), 0);
  char file_name[] = "/tmp/log_router_testXXXXXX";
  const int file_fd = mkstemp(file_name);
  {
    LogRouter router;
    router.add(
        worker[0], [](const std::string& line) { return "[rank0]:" + line + "\n"; }, console[1], dup(file_fd),
        live_status);
    for (const std::string& c : chunks) {
      EXPECT_EQ(write(worker[1], c.data(), c.size()), static_cast<ssize_t>(c.size()));
      usleep(2000);  // separate reads: a "\r" may arrive without what follows it
    }
    close(worker[1]);
    router.drain(std::chrono::seconds(5));
  }
  Routed out;
  char buf[4096];
  for (ssize_t n; (n = read(console[0], buf, sizeof(buf))) > 0;) out.console.append(buf, static_cast<size_t>(n));
  lseek(file_fd, 0, SEEK_SET);
  for (ssize_t n; (n = read(file_fd, buf, sizeof(buf))) > 0;) out.file.append(buf, static_cast<size_t>(n));
  close(file_fd);
  unlink(file_name);
  close(console[0]);
  close(console[1]);
  return out;
}

TEST(LogRouter, StatusLinesAreDrawnOverTheLineOnATerminal) {
  const Routed r = route({"start\n", "bar 1\r", "bar 2\r", "step 10 done\n", "bar 3\r"}, true);
  const std::string erase = "\r\x1b[K";
  EXPECT_EQ(r.console, "[rank0]:start\n" + erase + "[rank0]:bar 1" + erase + "[rank0]:bar 2" + erase +
                           "[rank0]:step 10 done\n" + erase + "[rank0]:bar 3");
  EXPECT_EQ(r.file, "start\nstep 10 done\n");  // the files keep the lines only
}

TEST(LogRouter, StatusLinesAreDroppedWhenTheConsoleIsNoTerminal) {
  const Routed r = route({"start\n", "bar 1\r", "bar 2\rstep 10 done\n"}, false);
  EXPECT_EQ(r.console, "[rank0]:start\n[rank0]:step 10 done\n");
}

TEST(LogRouter, CarriageReturnNewlineEndsALineEvenSplitAcrossReads) {
  const Routed r = route({"one\r", "\ntwo\r\n", "three"}, true);
  EXPECT_EQ(r.console, "[rank0]:one\n[rank0]:two\n[rank0]:three\n");
}

}  // namespace
}  // namespace trainrun
