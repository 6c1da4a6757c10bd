// KeyValueTable semantics (shared by every store), HashStore's waiting and
// PrefixStore's key mapping.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "store/hash_store.h"
#include "store/key_value_table.h"
#include "store/prefix_store.h"
#include "store/store_barrier.h"
#include "tests/store/store_test_util.h"

namespace trainrun {
namespace {

using namespace std::chrono_literals;

TEST(KeyValueTable, AddKeepsDecimalTextAndRejectsOtherValues) {
  KeyValueTable t;
  bool created = false;
  EXPECT_EQ(t.add("n", 5, &created), 5);
  EXPECT_TRUE(created);
  EXPECT_EQ(t.add("n", -7, &created), -2);
  EXPECT_FALSE(created);
  EXPECT_EQ(to_string(*t.find("n")), "-2");
  t.set("twelve", to_bytes("12"));
  EXPECT_EQ(t.add("twelve", 1, &created), 13);
  t.set("text", to_bytes("12abc"));
  expect_error<ValueError>([&] { t.add("text", 1, &created); }, {"add", "'text'", "not a decimal integer"});
  t.set("big", to_bytes(std::to_string(INT64_MAX)));
  expect_error<ValueError>([&] { t.add("big", 1, &created); }, {"overflows", "'big'"});
  EXPECT_EQ(parse_decimal(to_bytes("+4")), 4);
  EXPECT_FALSE(parse_decimal(to_bytes("")).has_value());
  EXPECT_FALSE(parse_decimal(to_bytes(" 4")).has_value());
}

TEST(KeyValueTable, CompareSetFollowsPyTorch) {
  KeyValueTable t;
  bool created = false;
  EXPECT_EQ(to_string(t.compare_set("k", {}, to_bytes("init"), &created)), "init");  // missing + empty expected
  EXPECT_TRUE(created);
  EXPECT_EQ(to_string(t.compare_set("k", to_bytes("init"), to_bytes("new"), &created)), "new");
  EXPECT_EQ(to_string(t.compare_set("k", to_bytes("WRONG"), to_bytes("x"), &created)), "new");
  EXPECT_EQ(to_string(t.compare_set("m", to_bytes("exp"), to_bytes("des"), &created)), "exp");  // the quirk
  EXPECT_FALSE(created);
  EXPECT_FALSE(t.contains("m"));
  EXPECT_TRUE(t.append("a", to_bytes("x")));
  EXPECT_FALSE(t.append("a", to_bytes("yz")));
  EXPECT_EQ(to_string(*t.find("a")), "xyz");
  EXPECT_EQ(t.first_missing({"a", "zz", "k"}), std::optional<std::string>("zz"));
}

TEST(HashStore, EveryOperation) {
  HashStore s;
  s.set("a", std::string("1"));
  EXPECT_EQ(s.get_string("a"), "1");
  EXPECT_EQ(s.add("n", 3), 3);
  EXPECT_TRUE(s.check({"a", "n"}));
  EXPECT_FALSE(s.check({"a", "zz"}));
  s.append("a", to_bytes("23"));
  EXPECT_EQ(s.get_string("a"), "123");
  s.multi_set({"x", "y"}, {to_bytes("X"), to_bytes("Y")});
  auto values = s.multi_get({"y", "x"});
  EXPECT_EQ(to_string(values[0]), "Y");
  EXPECT_EQ(to_string(values[1]), "X");
  EXPECT_EQ(s.num_keys(), 4);
  EXPECT_TRUE(s.delete_key("x"));
  EXPECT_FALSE(s.delete_key("x"));
  EXPECT_EQ(s.num_keys(), 3);
  expect_error<ValueError>([&] { s.multi_set({"a"}, {}); }, {"multi_set", "1 keys but 0 values"});
}

TEST(HashStore, WaitersWakeOnEveryCreatingOperation) {
  HashStore s(5s);
  std::vector<std::function<void()>> creators = {
      [&] { s.set("k0", std::string("v")); },
      [&] { s.add("k1", 1); },
      [&] { s.compare_set("k2", {}, to_bytes("v")); },
      [&] { s.append("k3", to_bytes("v")); },
      [&] { s.multi_set({"other", "k4"}, {to_bytes("o"), to_bytes("v")}); },
  };
  for (size_t i = 0; i < creators.size(); ++i) {
    std::string key = "k" + std::to_string(i);
    std::atomic<bool> done{false};
    std::thread waiter([&] {
      s.wait({key});
      done = true;
    });
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(done.load()) << key;
    creators[i]();
    waiter.join();
    EXPECT_TRUE(done.load()) << key;
  }
}

TEST(HashStore, TimeoutsNameTheKey) {
  HashStore s(50ms);
  auto t0 = std::chrono::steady_clock::now();
  expect_error<TimeoutError>([&] { s.get("never"); }, {"get", "50 ms", "'never'"});
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
  s.set("a", std::string("1"));
  expect_error<TimeoutError>([&] { s.wait({"a", "b"}, 20ms); }, {"wait", "'b'"});
}

TEST(PrefixStore, MapsKeysUnderItsPrefix) {
  auto base = std::make_shared<HashStore>(1s);
  PrefixStore p("job1", base);
  PrefixStore nested("inner", std::make_shared<PrefixStore>("outer", base));
  p.set("a", std::string("1"));
  EXPECT_TRUE(base->check({"job1/a"}));
  EXPECT_EQ(p.get_string("a"), "1");
  EXPECT_EQ(p.add("n", 2), 2);
  EXPECT_EQ(base->get_string("job1/n"), "2");
  nested.set("z", std::string("deep"));
  EXPECT_EQ(base->get_string("outer/inner/z"), "deep");
  p.multi_set({"x"}, {to_bytes("X")});
  EXPECT_EQ(to_string(p.multi_get({"x"})[0]), "X");
  EXPECT_TRUE(p.check({"a", "x"}));
  EXPECT_FALSE(p.check({"job1/a"}));
  EXPECT_TRUE(p.delete_key("x"));
  EXPECT_EQ(p.num_keys(), base->num_keys());
  expect_error<ValueError>([&] { PrefixStore("p", nullptr); }, {"PrefixStore", "null"});
}

TEST(StoreBarrier, ReleasesEveryoneAtOnceAndReportsStragglers) {
  auto store = std::make_shared<HashStore>(5s);
  std::vector<std::thread> threads;
  std::atomic<int> passed{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      store_barrier(*store, "b0", 4, 5s);
      passed++;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(passed.load(), 4);
  expect_error<TimeoutError>([&] { store_barrier(*store, "b1", 3, 30ms); }, {"b1", "only 1 of 3"});
}

// The launcher's end-of-job report: nodes arrive without waiting; only the store's host waits for all.
TEST(StoreBarrier, ArrivalsWithoutWaitingReleaseTheOneWhoWaits) {
  HashStore store(5s);
  EXPECT_EQ(store_barrier_arrive(store, "end", 3), 1);
  EXPECT_EQ(store_barrier_arrive(store, "end", 3), 2);
  expect_error<TimeoutError>([&] { store_barrier_wait(store, "end", 3, 30ms); }, {"end", "only 2 of 3"});
  std::thread last([&] { store_barrier_arrive(store, "end", 3); });
  store_barrier_wait(store, "end", 3, 5s);
  last.join();
  expect_error<ValueError>([&] { store_barrier_arrive(store, "end", 3); }, {"4 participants arrived", "reuse"});
}

}  // namespace
}  // namespace trainrun
