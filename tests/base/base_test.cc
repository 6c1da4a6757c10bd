#include <gtest/gtest.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/crc32c.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"

namespace trainrun {
namespace {

TEST(Deadline, AfterATimeoutIsThatFarAhead) {
  const Deadline d = deadline_after(Milliseconds(500));
  const int64_t left = ms_left(d);
  EXPECT_GT(left, 400);
  EXPECT_LE(left, 500);
  EXPECT_FALSE(passed(d));
}

TEST(Deadline, HugeTimeoutSaturatesInsteadOfWrappingIntoThePast) {
  const Deadline d = deadline_after(Milliseconds::max());
  EXPECT_EQ(d, Deadline::max());
  EXPECT_FALSE(passed(d));
  EXPECT_GT(ms_left(d), int64_t{1} << 40);
  // One hour short of the limit still saturates rather than overflowing.
  EXPECT_EQ(deadline_after(Milliseconds::max() - Milliseconds(3600 * 1000)), Deadline::max());
}

TEST(Deadline, ZeroOrNegativeTimeoutHasAlreadyPassed) {
  EXPECT_TRUE(passed(deadline_after(Milliseconds(0))));
  EXPECT_TRUE(passed(deadline_after(Milliseconds(-5))));
  EXPECT_EQ(ms_left(deadline_after(Milliseconds(-5))), 0);
}

TEST(Deadline, MsLeftRoundsUpSoAPollNeverWakesEarly) {
  const Deadline d = Clock::now() + std::chrono::microseconds(1500);
  EXPECT_EQ(ms_left(d), 2);
}

// Captures what log_line writes to stderr (fd 2) through a pipe.
std::string capture_stderr(const std::function<void()>& fn) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const int saved = dup(2);
  dup2(fds[1], 2);
  close(fds[1]);
  fn();
  dup2(saved, 2);
  close(saved);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return text;
}

TEST(LogLine, PrefixesTheComponentAndEndsTheLine) {
  EXPECT_EQ(capture_stderr([] { log_line("store", "listening"); }), "trainrun store: listening\n");
  EXPECT_EQ(capture_stderr([] { log_line("", "no script given\n"); }), "trainrun: no script given\n");
}

TEST(LogLine, LinesFromManyThreadsNeverInterleave) {
  const std::string text = capture_stderr([] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([t] {
        for (int i = 0; i < 50; ++i) log_line("t" + std::to_string(t), std::string(200, static_cast<char>('a' + t)));
      });
    for (auto& th : threads) th.join();
  });
  size_t lines = 0, start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    const std::string line = text.substr(start, end - start);
    ASSERT_EQ(line.size(), std::string("trainrun t0: ").size() + 200) << line;
    const char c = line.back();
    EXPECT_EQ(line.substr(line.size() - 200), std::string(200, c)) << "a line was cut by another: " << line;
    ++lines;
    start = end + 1;
  }
  EXPECT_EQ(lines, 200u);
}

TEST(Crc32c, KnownValuesAndContinuation) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value of CRC-32C
  EXPECT_EQ(crc32c("", 0), 0u);
  // 32 zero bytes and 32 0xff bytes (RFC 3720's test vectors).
  std::string zeros(32, '\0'), ones(32, '\xff');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  // In pieces (odd lengths, so the 8-byte steps and the byte tail both run) equals at once.
  std::string text;
  for (int i = 0; i < 1000; ++i) text += static_cast<char>(i * 7 + 3);
  const uint32_t whole = crc32c(text.data(), text.size());
  EXPECT_EQ(crc32c(text.data() + 13, text.size() - 13, crc32c(text.data(), 13)), whole);
  text[500] ^= 1;
  EXPECT_NE(crc32c(text.data(), text.size()), whole);
}

TEST(Errors, CheckThrowsTheNamedClassWithTheFormattedMessage) {
  try {
    TR_CHECK(1 + 1 == 3, IndexError, "dim {} is out of range for {} dims", 4, 2);
    FAIL() << "TR_CHECK did not throw";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(), "dim 4 is out of range for 2 dims");
  }
  EXPECT_NO_THROW(TR_CHECK(true, ValueError, "never"));
}

}  // namespace
}  // namespace trainrun
