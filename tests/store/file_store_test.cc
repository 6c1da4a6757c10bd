// FileStore: every operation, several instances and processes on one file,
// removal by the last user, and a corrupt file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "store/file_store.h"
#include "tests/store/store_test_util.h"

namespace trainrun {
namespace {

using namespace std::chrono_literals;

std::string temp_path(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name + "." + std::to_string(::getpid());
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(FileStore, EveryOperation) {
  const std::string path = temp_path("every");
  {
    FileStore s(path, 2s);
    s.set("a", std::string("1"));
    EXPECT_EQ(s.get_string("a"), "1");
    EXPECT_EQ(s.add("n", 3), 3);
    EXPECT_EQ(s.add("n", -1), 2);
    EXPECT_TRUE(s.check({"a", "n"}));
    EXPECT_FALSE(s.check({"zz"}));
    s.append("a", to_bytes("23"));
    EXPECT_EQ(s.get_string("a"), "123");
    EXPECT_EQ(to_string(s.compare_set("a", to_bytes("123"), to_bytes("x"))), "x");
    EXPECT_EQ(to_string(s.compare_set("a", to_bytes("no"), to_bytes("y"))), "x");
    EXPECT_EQ(to_string(s.compare_set("m", to_bytes("exp"), to_bytes("des"))), "exp");
    s.multi_set({"p", "q"}, {to_bytes("P"), to_bytes("Q")});
    EXPECT_EQ(to_string(s.multi_get({"q", "p"})[0]), "Q");
    EXPECT_EQ(s.num_keys(), 4);  // a n p q
    EXPECT_TRUE(s.delete_key("p"));
    EXPECT_FALSE(s.delete_key("p"));
    EXPECT_FALSE(s.check({"p"}));
    EXPECT_EQ(s.num_keys(), 3);
    expect_error<TimeoutError>([&] { s.wait({"never"}, 30ms); }, {path.c_str(), "30 ms", "'never'"});
    s.set("text", std::string("abc"));
    expect_error<ValueError>([&] { s.add("text", 1); }, {"not a decimal integer"});
  }
  EXPECT_FALSE(exists(path)) << "the last FileStore should remove the file";
}

TEST(FileStore, InstancesShareKeysAndTheLastOneRemovesTheFile) {
  const std::string path = temp_path("shared");
  auto a = std::make_unique<FileStore>(path, 5s);
  auto b = std::make_unique<FileStore>(path, 5s);
  std::atomic<bool> got{false};
  std::string error;
  std::thread waiter([&] {
    try {
      EXPECT_EQ(b->get_string("from_a"), "hi");
      got = true;
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(got.load());
  a->set("from_a", std::string("hi"));
  waiter.join();
  EXPECT_TRUE(got.load()) << error;
  a.reset();
  EXPECT_TRUE(exists(path)) << "b still uses the file";
  EXPECT_EQ(b->get_string("from_a"), "hi");
  b.reset();
  EXPECT_FALSE(exists(path));
}

TEST(FileStore, ProcessesCountTogether) {
  const std::string path = temp_path("procs");
  FileStore parent(path, 10s);
  const int children = 4;
  std::vector<pid_t> pids;
  for (int i = 0; i < children; ++i) {
    pid_t pid = ::fork();  // no threads exist in this test process here
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        FileStore s(path, Milliseconds(10000));
        for (int j = 0; j < 50; ++j) s.add("counter", 1);
        s.set("child" + std::to_string(i), std::string("done"));
        s.wait({"release"});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        rc = 1;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  std::vector<std::string> done;
  for (int i = 0; i < children; ++i) done.push_back("child" + std::to_string(i));
  parent.wait(done);
  EXPECT_EQ(parent.add("counter", 0), 50 * children);
  parent.set("release", std::string("1"));
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_TRUE(exists(path));  // the parent is still in
}

TEST(FileStore, CorruptFileIsReportedWithThePathAndOffset) {
  const std::string path = temp_path("corrupt");
  FileStore s(path, 1s);
  s.set("ok", std::string("1"));
  {
    std::ofstream f(path, std::ios::app | std::ios::binary);
    f << '\x07' << "garbage";
  }
  expect_error<DistBackendError>([&] { s.check({"ok"}); }, {path.c_str(), "corrupt record at byte", "unknown record kind"});
  std::remove(path.c_str());
  expect_error<DistBackendError>([&] { FileStore("/nonexistent-dir/x/store", 1s); }, {"/nonexistent-dir/x/store", "cannot open"});
}


TEST(FileStore, AHeldLockTimesOutInsteadOfHanging) {
  const std::string path = temp_path("held");
  FileStore s(path, std::chrono::milliseconds(100));
  int fd = ::open(path.c_str(), O_RDWR);  // another open file description: its lock excludes ours
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  expect_error<TimeoutError>([&] { s.set("k", std::string("v")); }, {path.c_str(), "lock", "100 ms"});
  ::flock(fd, LOCK_UN);
  ::close(fd);
  s.set("k", std::string("v"));
  EXPECT_EQ(s.get_string("k"), "v");
}

}  // namespace
}  // namespace trainrun
