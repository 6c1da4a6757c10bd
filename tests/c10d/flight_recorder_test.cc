// The flight recorder: a ring of the last N operations with their states and
// times, its JSON dump, dumps written atomically to TRAINRUN_FR_DUMP_DIR, and
// one rank's failure asking every other rank for its dump through the store;
// and ProcessGroupWrapper recording every collective and point-to-point
// operation of a group into the process's recorder.
#include "c10d/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "c10d/process_group_wrapper.h"
#include "store/hash_store.h"
#include "tensor/factories.h"

namespace trainrun {
namespace c10d {
namespace {

using namespace std::chrono_literals;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A temporary TRAINRUN_FR_DUMP_DIR for one test.
class DumpDir {
 public:
  DumpDir() {
    char tmpl[] = "/tmp/flight_recorder_test.XXXXXX";
    path = mkdtemp(tmpl);
    setenv("TRAINRUN_FR_DUMP_DIR", path.c_str(), 1);
  }
  ~DumpDir() {
    unsetenv("TRAINRUN_FR_DUMP_DIR");
    (void)!std::system(("rm -rf " + path).c_str());
  }
  std::string path;
};

TEST(FlightRecorder, KeepsTheLastOperationsWithTheirStates) {
  FlightRecorder fr(3);
  const int g = fr.register_group("default", "gloo", {0, 1});
  std::vector<std::shared_ptr<Work>> works;
  std::vector<uint64_t> ids;
  for (int i = 1; i <= 5; ++i) {
    works.push_back(std::make_shared<Work>("w"));
    ids.push_back(
        fr.record(g, i, FlightRecorder::Kind::Collective, list_call(fmt::format("allreduce #{}", i)), works.back()));
  }
  fr.completed(ids[0], 0, "");  // long overwritten: ignored
  works[2]->mark_started();
  fr.completed(ids[3], 0, "");
  fr.completed(ids[4], 0, "connection reset");
  const auto entries = fr.entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].seq, 3u);
  EXPECT_EQ(entries[0].state, "started");
  EXPECT_GT(entries[0].started_ns, 0);
  EXPECT_EQ(entries[1].state, "completed");
  EXPECT_GE(entries[1].completed_ns, entries[1].created_ns);
  EXPECT_EQ(entries[2].state, "failed");
  EXPECT_EQ(entries[2].error, "connection reset");

  const nlohmann::json dump = nlohmann::json::parse(fr.dump_json("a test"));
  EXPECT_EQ(dump["reason"], "a test");
  EXPECT_EQ(dump["groups"][0]["name"], "default");
  EXPECT_EQ(dump["groups"][0]["ranks"], nlohmann::json({0, 1}));
  ASSERT_EQ(dump["entries"].size(), 3u);
  EXPECT_EQ(dump["entries"][0]["op"], "allreduce #3");
  EXPECT_EQ(dump["entries"][0]["group"], "default");
  EXPECT_EQ(dump["entries"][2]["error"], "connection reset");
}

TEST(CollectiveCall, FormatsEachKindOfCall) {
  Tensor t = ones({4, 2});
  EXPECT_EQ(CollectiveCall("allreduce", t).with_reduce(ReduceOp::MAX).format(), "allreduce(float32 [4, 2], MAX)");
  EXPECT_EQ(CollectiveCall("reduce", t).with_root(1).with_reduce({}).format(), "reduce(float32 [4, 2], root 1, SUM)");
  EXPECT_EQ(CollectiveCall("broadcast", t).with_root(0).format(), "broadcast(float32 [4, 2], root 0)");
  EXPECT_EQ(CollectiveCall("send", t).with_peer(3, 7).format(), "send(float32 [4, 2], to 3, tag 7)");
  EXPECT_EQ(CollectiveCall("recv", t).with_peer(-2, 0).format(), "recv(float32 [4, 2], from any, tag 0)");
  EXPECT_EQ(CollectiveCall("barrier").format(), "barrier()");
  EXPECT_EQ(CollectiveCall("allgather", zeros({1, 1, 1, 1, 1, 1, 1, 1, 2})).format(),
            "allgather(float32 [1, 1, 1, 1, 1, 1, 1, 1, ...])");
  EXPECT_EQ(list_call("alltoall(2 x float32)").format(), "alltoall(2 x float32)");
}

TEST(FlightRecorder, CapacityZeroRecordsNothing) {
  FlightRecorder fr(0);
  EXPECT_FALSE(fr.enabled());
  EXPECT_EQ(fr.record(fr.register_group("g", "gloo", {0}), 1, FlightRecorder::Kind::Collective,
                      CollectiveCall("barrier"), nullptr),
            0u);
  fr.completed(0, 0, "");
  EXPECT_TRUE(fr.entries().empty());
}

TEST(FlightRecorder, DumpsOnlyWhereADirectoryIsGiven) {
  FlightRecorder fr(4);
  fr.set_rank(3);
  unsetenv("TRAINRUN_FR_DUMP_DIR");
  EXPECT_EQ(fr.dump_to_dir("x"), "");
  DumpDir dir;
  const std::string path = fr.dump_to_dir("because");
  EXPECT_EQ(path, dir.path + "/rank3.json");
  EXPECT_EQ(nlohmann::json::parse(read(path))["rank"], 3);
}

TEST(FlightRecorder, OneRanksFailureAsksEveryWatchingRankForItsDump) {
  DumpDir dir;
  auto store = std::make_shared<HashStore>();
  FlightRecorder rank0(8), rank1(8), rank2(8);
  rank0.set_rank(0);
  rank1.set_rank(1);
  rank2.set_rank(2);
  rank1.watch(store, 20ms);
  rank2.watch(store, 20ms);
  rank0.watch(store, 20ms);
  rank0.dump_everywhere("allreduce #4 timed out");
  EXPECT_EQ(nlohmann::json::parse(read(dir.path + "/rank0.json"))["reason"], "allreduce #4 timed out");
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while ((access((dir.path + "/rank1.json").c_str(), F_OK) != 0 ||
          access((dir.path + "/rank2.json").c_str(), F_OK) != 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_NE(read(dir.path + "/rank1.json").find("another rank asked"), std::string::npos);
  EXPECT_NE(read(dir.path + "/rank2.json").find("another rank asked"), std::string::npos);
  rank1.watch(nullptr);  // stops; a second stop (the destructor) is harmless
}

TEST(FlightRecorder, ALaterWatcherIgnoresRequestsMadeBeforeItJoined) {
  DumpDir dir;
  auto store = std::make_shared<HashStore>();
  FlightRecorder old_rank(4), new_rank(4);
  old_rank.set_rank(0);
  new_rank.set_rank(1);
  old_rank.watch(store, 10ms);
  old_rank.dump_everywhere("an earlier attempt failed");
  new_rank.watch(store, 10ms);
  std::this_thread::sleep_for(150ms);
  EXPECT_NE(access((dir.path + "/rank1.json").c_str(), F_OK), 0) << "answered a request older than itself";
}

// Completes nothing by itself: the test finishes the works.
class FakeBackend final : public ProcessGroup {
 public:
  FakeBackend() : ProcessGroup(0, 2, "fr_fake", Milliseconds(1000)) {}
  ~FakeBackend() override {
    for (auto& w : works) w->finish(std::make_exception_ptr(DistBackendError("destroyed")));
  }
  std::string backend_name() const override { return "fake"; }
  std::vector<std::shared_ptr<Work>> works;
  std::shared_ptr<Work> make() {
    works.push_back(std::make_shared<Work>(fmt::format("op #{} on group 'fr_fake'", works.size() + 1)));
    return works.back();
  }
  std::shared_ptr<Work> allreduce(Tensor&, ReduceOp) override { return make(); }
  std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>&, ReduceOp) override { return make(); }
  std::shared_ptr<Work> broadcast(Tensor&, int) override { return make(); }
  std::shared_ptr<Work> reduce(Tensor&, int, ReduceOp) override { return make(); }
  std::shared_ptr<Work> allgather(std::vector<Tensor>&, const Tensor&) override { return make(); }
  std::shared_ptr<Work> all_gather_into_tensor(Tensor&, const Tensor&) override { return make(); }
  std::shared_ptr<Work> reduce_scatter(Tensor&, std::vector<Tensor>&, ReduceOp) override { return make(); }
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor&, const Tensor&, ReduceOp) override { return make(); }
  std::shared_ptr<Work> alltoall_base(Tensor&, const Tensor&, const IntList&, const IntList&) override {
    return make();
  }
  std::shared_ptr<Work> alltoall(std::vector<Tensor>&, std::vector<Tensor>&) override { return make(); }
  std::shared_ptr<Work> gather(std::vector<Tensor>&, const Tensor&, int) override { return make(); }
  std::shared_ptr<Work> scatter(Tensor&, std::vector<Tensor>&, int) override { return make(); }
  std::shared_ptr<Work> barrier() override { return make(); }
  std::shared_ptr<Work> send(const Tensor&, int, int) override { return make(); }
  std::shared_ptr<Work> recv(Tensor&, int, int) override { return make(); }
  std::shared_ptr<Work> recv_anysource(Tensor&, int) override { return make(); }
};

// The global recorder's entry of group 'fr_fake' with this op text (the last one).
FlightRecorder::Entry find(const std::string& op) {
  FlightRecorder::Entry found;
  const auto groups = FlightRecorder::global().groups();
  for (const auto& e : FlightRecorder::global().entries())
    if (e.op == op && e.group >= 0 && groups[e.group].name == "fr_fake") found = e;
  return found;
}

TEST(ProcessGroupWrapper, RecordsEveryOperationInTheFlightRecorder) {
  DumpDir dir;
  FlightRecorder::global().set_rank(0);
  auto backend = std::make_shared<FakeBackend>();
  ProcessGroupWrapper pg(backend, std::make_shared<HashStore>(), false);
  Tensor t = ones({2});
  auto w = pg.allreduce(t);
  FlightRecorder::Entry e = find("allreduce(float32 [2], SUM)");
  EXPECT_EQ(e.seq, 1u);
  EXPECT_EQ(e.kind, FlightRecorder::Kind::Collective);
  EXPECT_EQ(e.state, "scheduled");
  backend->works[0]->mark_started();
  EXPECT_EQ(find("allreduce(float32 [2], SUM)").state, "started");
  backend->works[0]->finish();
  e = find("allreduce(float32 [2], SUM)");
  EXPECT_EQ(e.state, "completed");
  EXPECT_LE(e.created_ns, e.started_ns);
  EXPECT_LE(e.started_ns, e.completed_ns);

  pg.send(t, 1, 5);
  e = find("send(float32 [2], to 1, tag 5)");
  EXPECT_EQ(e.kind, FlightRecorder::Kind::PointToPoint);
  EXPECT_EQ(e.seq, 1u);
  auto failing = pg.broadcast(t, 1);
  EXPECT_EQ(find("broadcast(float32 [2], root 1)").seq, 2u) << "p2p operations do not take collective numbers";

  // A failed collective is recorded with its error, and this rank's record is dumped.
  backend->works[2]->finish(std::make_exception_ptr(DistBackendError("op #3: connection reset")));
  EXPECT_THROW(failing->wait(), DistBackendError);
  e = find("broadcast(float32 [2], root 1)");
  EXPECT_EQ(e.state, "failed");
  EXPECT_NE(e.error.find("connection reset"), std::string::npos) << e.error;
  const nlohmann::json dump = nlohmann::json::parse(read(dir.path + "/rank0.json"));
  EXPECT_NE(dump["reason"].get<std::string>().find("connection reset; ranks that had not entered #2"),
            std::string::npos)
      << dump["reason"];
  bool dumped_failed = false;
  for (const auto& entry : dump["entries"])
    dumped_failed = dumped_failed || (entry["group"] == "fr_fake" && entry["state"] == "failed");
  EXPECT_TRUE(dumped_failed);
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun
