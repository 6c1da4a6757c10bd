// ProcessGroupWrapper over a fake backend whose works the test completes by
// hand: failures gain the laggard report, other errors pass unchanged, a
// GPU-style wait does not block the host, and the debug signature check
// catches mismatched collectives between "ranks" (threads sharing a store).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "c10d/process_group_wrapper.h"
#include "store/hash_store.h"
#include "tensor/factories.h"

namespace trainrun {
namespace c10d {
namespace {

using namespace std::chrono_literals;

// A work whose wait() returns at once, as a GPU backend's does (it makes the
// caller's stream wait instead of the host).
class StreamStyleWork final : public Work {
 public:
  using Work::Work;
  void wait(std::optional<std::chrono::milliseconds>) override {}
};

// Every collective returns a work the test finishes; nothing is communicated.
class FakeBackend final : public ProcessGroup {
 public:
  FakeBackend(int rank, int size, bool stream_style = false)
      : ProcessGroup(rank, size, "fake", Milliseconds(1000)), stream_style_(stream_style) {}
  ~FakeBackend() override {
    for (auto& w : works)
      w->finish(std::make_exception_ptr(DistBackendError(w->description() + ": the group was destroyed")));
  }
  std::string backend_name() const override { return "fake"; }

  std::vector<std::shared_ptr<Work>> works;

  std::shared_ptr<Work> make(const char* op) {
    const std::string d = fmt::format("{} #{} on group 'fake'", op, works.size() + 1);
    works.push_back(stream_style_ ? std::make_shared<StreamStyleWork>(d) : std::make_shared<Work>(d));
    return works.back();
  }
  std::shared_ptr<Work> allreduce(Tensor&, ReduceOp) override { return make("allreduce"); }
  std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>&, ReduceOp) override { return make("allreduce_coalesced"); }
  std::shared_ptr<Work> broadcast(Tensor&, int) override { return make("broadcast"); }
  std::shared_ptr<Work> reduce(Tensor&, int, ReduceOp) override { return make("reduce"); }
  std::shared_ptr<Work> allgather(std::vector<Tensor>&, const Tensor&) override { return make("allgather"); }
  std::shared_ptr<Work> all_gather_into_tensor(Tensor&, const Tensor&) override { return make("all_gather_into_tensor"); }
  std::shared_ptr<Work> reduce_scatter(Tensor&, std::vector<Tensor>&, ReduceOp) override { return make("reduce_scatter"); }
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor&, const Tensor&, ReduceOp) override {
    return make("reduce_scatter_tensor");
  }
  std::shared_ptr<Work> alltoall_base(Tensor&, const Tensor&, const IntList&, const IntList&) override {
    return make("alltoall_base");
  }
  std::shared_ptr<Work> alltoall(std::vector<Tensor>&, std::vector<Tensor>&) override { return make("alltoall"); }
  std::shared_ptr<Work> gather(std::vector<Tensor>&, const Tensor&, int) override { return make("gather"); }
  std::shared_ptr<Work> scatter(Tensor&, std::vector<Tensor>&, int) override { return make("scatter"); }
  std::shared_ptr<Work> barrier() override { return make("barrier"); }
  std::shared_ptr<Work> send(const Tensor&, int, int) override { return make("send"); }
  std::shared_ptr<Work> recv(Tensor&, int, int) override { return make("recv"); }
  std::shared_ptr<Work> recv_anysource(Tensor&, int) override { return make("recv_anysource"); }

 private:
  bool stream_style_;
};

std::string message_of(const std::shared_ptr<Work>& w) {
  try {
    w->wait();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ProcessGroupWrapper, SuccessPassesThroughAndChains) {
  auto backend = std::make_shared<FakeBackend>(0, 1);
  auto store = std::make_shared<HashStore>();
  ProcessGroupWrapper pg(backend, store, false);
  EXPECT_EQ(pg.backend_name(), "fake");
  Tensor t = ones({2});
  auto w = pg.allreduce(t);
  bool ran = false;
  auto chained = w->then([&](Work&) { ran = true; });
  EXPECT_FALSE(w->is_completed());
  EXPECT_EQ(w->description(), "allreduce #1 on group 'fake'");
  backend->works[0]->finish();
  w->wait();
  EXPECT_TRUE(w->is_completed() && w->is_success());
  chained->wait();
  EXPECT_TRUE(ran);
}

TEST(ProcessGroupWrapper, AFailureNamesTheRanksThatHadNotEnteredIt) {
  auto store = std::make_shared<HashStore>();
  auto b0 = std::make_shared<FakeBackend>(0, 3), b1 = std::make_shared<FakeBackend>(1, 3),
       b2 = std::make_shared<FakeBackend>(2, 3);
  ProcessGroupWrapper pg0(b0, store, false), pg1(b1, store, false), pg2(b2, store, false);
  Tensor t = ones({2});
  // Every rank does #1; ranks 0 and 1 do #2; rank 2 never gets there.
  for (auto* pg : {&pg0, &pg1, &pg2}) pg->allreduce(t);
  auto w0 = pg0.broadcast(t, 0);
  pg1.broadcast(t, 0);
  b0->works[1]->finish(std::make_exception_ptr(DistBackendError("broadcast #2 on group 'fake': connection reset")));
  const std::string m = message_of(w0);
  EXPECT_NE(m.find("connection reset; ranks that had not entered #2: 2 (last at #1)"), std::string::npos) << m;
  // The backend's error type is kept.
  EXPECT_THROW(w0->wait(), DistBackendError);
}

TEST(ProcessGroupWrapper, BadInputErrorsPassUnchanged) {
  auto backend = std::make_shared<FakeBackend>(0, 1);
  ProcessGroupWrapper pg(backend, std::make_shared<HashStore>(), false);
  Tensor t = ones({2});
  auto w = pg.allreduce(t);
  backend->works[0]->finish(std::make_exception_ptr(ValueError("allreduce: bad dtype")));
  EXPECT_THROW(w->wait(), ValueError);
  EXPECT_EQ(message_of(w), "allreduce: bad dtype");
}

TEST(ProcessGroupWrapper, AGpuStyleWaitDoesNotBlockTheHost) {
  auto backend = std::make_shared<FakeBackend>(0, 1, /*stream_style=*/true);
  ProcessGroupWrapper pg(backend, std::make_shared<HashStore>(), false);
  Tensor t = ones({2});
  auto w = pg.allreduce(t);
  const auto t0 = std::chrono::steady_clock::now();
  w->wait();  // returns at once: the backend's wait did
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_FALSE(w->is_completed());
  backend->works[0]->finish();
  EXPECT_TRUE(w->is_completed());
}

TEST(ProcessGroupWrapper, PointToPointIsNotNumbered) {
  auto backend = std::make_shared<FakeBackend>(0, 2);
  ProcessGroupWrapper pg(backend, std::make_shared<HashStore>(), false);
  Tensor t = ones({2});
  auto s = pg.send(t, 1);
  EXPECT_EQ(s, backend->works[0]);  // the backend's own work
  auto w = pg.allreduce(t);
  backend->works[1]->finish(std::make_exception_ptr(DistBackendError("x")));
  EXPECT_NE(message_of(w).find("#1"), std::string::npos) << message_of(w);
}

TEST(ProcessGroupWrapper, PendingWorksOfADestroyedGroupFailWithoutALaggardReport) {
  auto store = std::make_shared<HashStore>();
  std::shared_ptr<Work> w;
  {
    auto backend = std::make_shared<FakeBackend>(0, 2);
    ProcessGroupWrapper pg(std::move(backend), store, false);
    Tensor t = ones({2});
    w = pg.allreduce(t);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = message_of(w);
  EXPECT_NE(m.find("destroyed"), std::string::npos) << m;
  EXPECT_EQ(m.find("had not entered"), std::string::npos) << m;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 150ms);  // no grace spent on laggards
}

// Debug mode: two ranks (threads) exchange signatures through their store.
TEST(ProcessGroupWrapper, SignatureCheckPassesMatchesAndNamesBothSidesOfAMismatch) {
  auto store = std::make_shared<HashStore>();
  auto b0 = std::make_shared<FakeBackend>(0, 2), b1 = std::make_shared<FakeBackend>(1, 2);
  ProcessGroupWrapper pg0(b0, store, true), pg1(b1, store, true);
  const int64_t keys_before = store->num_keys();
  std::string errors[2];
  auto rank = [&](ProcessGroupWrapper& pg, int r) {
    try {
      Tensor same = ones({3, 2});
      pg.allreduce(same);  // matches
      Tensor differs = ones({r == 0 ? 4 : 5});
      pg.allreduce(differs);
    } catch (const DistBackendError& e) {
      errors[r] = e.what();
    }
  };
  std::thread t1([&] { rank(pg1, 1); });
  rank(pg0, 0);
  t1.join();
  EXPECT_EQ(b0->works.size(), 1u) << "the mismatched collective must not reach the backend";
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("collective #2 on group 'fake' does not match across ranks"), std::string::npos) << e;
    EXPECT_NE(e.find("allreduce(float32 [4], SUM)"), std::string::npos) << e;
    EXPECT_NE(e.find("allreduce(float32 [5], SUM)"), std::string::npos) << e;
  }
  // Collective #1's signatures were read by both and removed.
  EXPECT_EQ(store->check({"signature/1/0"}), false);
  EXPECT_LE(store->num_keys(), keys_before + 2 + 3);  // progress keys, #2's signatures and counter at most
}

TEST(ProcessGroupWrapper, SignatureCheckNamesARankThatNeverCalled) {
  auto store = std::make_shared<HashStore>();
  ProcessGroupWrapper pg0(std::make_shared<FakeBackend>(0, 2), store, true);
  Tensor t = ones({2});
  try {
    pg0.barrier();
    FAIL() << "a barrier without rank 1 passed the check";
  } catch (const DistBackendError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 1 did not call a collective #1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun
