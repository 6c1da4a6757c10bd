// Runs each c10d_worker scenario with 2, 3 and 4 ranks under the trainrun
// launcher, and checks that every rank passed. A run that outlives its
// deadline is killed and reported, never waited on.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "c10d/device_backends_process_group.h"
#include "c10d/distributed.h"
#include "c10d/gloo/process_group_gloo.h"
#include "store/hash_store.h"
#include "tensor/ops.h"
#include "tests/expect_error.h"
#include "tests/multirank/run_ranks.h"

namespace trainrun {
namespace c10d {
namespace {

using namespace std::chrono_literals;

using multirank::expect_ranks_passed;
using multirank::RankRun;
using multirank::RankRunOptions;

constexpr const char* kWorker = "tests/c10d/c10d_worker";

RankRun run(const std::string& scenario, int world, std::vector<std::string> env = {},
            std::vector<std::string> rank0_env = {}) {
  RankRunOptions o;
  o.world = world;
  o.env = std::move(env);
  o.rank0_env = std::move(rank0_env);
  return multirank::run_ranks(kWorker, scenario, o);
}

void expect_all_passed(const std::string& scenario, int world, std::vector<std::string> env = {},
                       std::vector<std::string> rank0_env = {}) {
  expect_ranks_passed(run(scenario, world, std::move(env), std::move(rank0_env)));
}

// Ranks of one host use the shared-memory transport for allreduce,
// allgather, reduce_scatter and broadcast; the rest (and everything when it
// is off) goes over Gloo's TCP.
TEST(ProcessGroupGloo, EveryCollectiveOpAndDtype) {
  for (int world : {2, 3, 4}) expect_all_passed("collectives", world);
}

TEST(ProcessGroupGloo, EveryCollectiveOverTcpOnly) {
  for (int world : {2, 3}) expect_all_passed("collectives", world, {"TRAINRUN_SHM_COLLECTIVES=0"});
  // One rank turning it off turns it off for the whole group (no split decision).
  expect_all_passed("collectives", 3, {}, {"TRAINRUN_SHM_COLLECTIVES=0"});
}

TEST(ProcessGroupGloo, PointToPoint) {
  for (int world : {2, 3, 4}) expect_all_passed("p2p", world);
}

TEST(ProcessGroupGloo, AsyncWorkAndConcurrentGroups) {
  for (int world : {2, 4}) expect_all_passed("async", world);
}

// The trainrun-* shared-memory segment names in /dev/shm now.
std::set<std::string> shm_segments() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind("trainrun-", 0) == 0) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

TEST(ProcessGroupGloo, ADeadPeerFailsTheOthersWithinTheTimeout) {
  const std::set<std::string> before = shm_segments();  // (other tests' jobs may hold names while this one runs)
  for (bool shm : {true, false}) {
    // The dying rank exits 0 without a verdict; the others must pass.
    const RankRun r = run("peer_dies", 3, {shm ? "TRAINRUN_SHM_COLLECTIVES=1" : "TRAINRUN_SHM_COLLECTIVES=0"});
    EXPECT_EQ(r.exit_code, 0) << "shm=" << shm << ":\n" << r.output_of(0) << r.output_of(1);
    for (int rank : {0, 1}) EXPECT_NE(r.rank_output[rank].find("ok"), std::string::npos) << r.output_of(rank);
    const std::string& log = r.rank_output[0];
    EXPECT_NE(log.find("allreduce #2 on group 'default'"), std::string::npos) << log;
    EXPECT_NE(log.find("had not entered #2: 2"), std::string::npos) << log;
    if (shm) {
      EXPECT_NE(log.find("has exited"), std::string::npos) << log;  // the shared-memory barrier saw the pid go
    }
  }
  // Segment names are unlinked as soon as every rank has mapped them: the
  // killed rank left nothing behind in /dev/shm. Only names that appeared
  // during this test count, and only those still there a moment later (a
  // job of a test running alongside holds its names for milliseconds).
  std::vector<std::string> left;
  for (const std::string& name : shm_segments())
    if (!before.count(name)) left.push_back(name);
  if (!left.empty()) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const std::set<std::string> now = shm_segments();
    left.erase(std::remove_if(left.begin(), left.end(), [&](const std::string& n) { return !now.count(n); }), left.end());
  }
  EXPECT_TRUE(left.empty()) << "left in /dev/shm: " << left.size() << " segments, e.g. "
                            << (left.empty() ? "" : left[0]);
}

TEST(ProcessGroupGloo, ATimeoutNamesTheRanksThatHadNotEnteredTheCollective) {
  for (const char* env : {"TRAINRUN_SHM_COLLECTIVES=1", "TRAINRUN_SHM_COLLECTIVES=0"}) {
    // Both ranks end early with status 0 (rank 0 after checking the error).
    const RankRun r = run("late_rank", 2, {env});
    EXPECT_EQ(r.exit_code, 0) << env << ":\n" << r.output_of(0);
    EXPECT_NE(r.rank_output[0].find("had not entered #2: 1 (last at #1)"), std::string::npos) << r.output_of(0);
  }
}

TEST(ProcessGroupGloo, DebugModeReportsMismatchedCollectives) { expect_all_passed("mismatch", 2); }

TEST(DistributedDataParallel, GradientsMatchOneProcessOnTheWholeBatch) {
  for (int world : {2, 3}) expect_all_passed("ddp", world);
}

TEST(ProcessGroupGloo, SingleRankGroupAndBadArguments) {
  auto store = std::make_shared<HashStore>();
  ProcessGroupGloo pg(store, 0, 1, "solo", {});
  Tensor t = full({3}, 2.0);
  pg.allreduce(t, ReduceOp::PRODUCT)->wait();
  EXPECT_EQ(t.select(0, 0).item<double>(), 2.0);
  expect_error<ValueError>([&] { pg.broadcast(t, 1); }, {"broadcast", "root 1", "not a rank", "size 1"});
  expect_error<ValueError>([&] { pg.send(t, 0); }, {"send", "itself"});
  Tensor out = empty({4});
  expect_error<ValueError>([&] { pg.reduce_scatter_tensor(out, t); }, {"reduce_scatter_tensor", "must hold"});
  expect_error<ValueError>([] { ProcessGroupGloo(std::make_shared<HashStore>(), 2, 2, "bad", {}); },
                           {"rank 2", "[0, 2)"});
}

// backend="cpu:gloo,cuda:nccl": each device's backend group is made at its first collective; a device without
// a backend, or a malformed map, is named.
TEST(DeviceBackendsProcessGroup, CollectivesGoToTheirDevicesBackendMadeAtFirstUse) {
  expect_error<ValueError>([] { DeviceBackendsProcessGroup::parse("cpu:gloo,gloo"); }, {"'gloo'", "device:backend"});
  expect_error<ValueError>([] { DeviceBackendsProcessGroup::parse("tpu:gloo"); }, {"device 'tpu'", "cpu or cuda"});
  expect_error<ValueError>([] { DeviceBackendsProcessGroup::parse("cpu:gloo,cpu:nccl"); },
                           {"names device 'cpu' twice"});
  auto map = DeviceBackendsProcessGroup::parse("cpu:gloo,cuda:nccl");
  EXPECT_EQ(map.at("cpu"), "gloo");
  EXPECT_EQ(map.at("cuda"), "nccl");
  std::vector<std::string> made;
  auto store = std::make_shared<HashStore>();
  DeviceBackendsProcessGroup pg(0, 1, "solo", std::chrono::seconds(30), "cpu:gloo", {{"cpu", "gloo"}},
                                [&](const std::string& backend, const std::string& device) {
                                  made.push_back(device + ":" + backend);
                                  return std::make_shared<ProcessGroupGloo>(store, 0, 1, "solo",
                                                                            ProcessGroupGloo::Options{});
                                });
  EXPECT_TRUE(made.empty());  // (nothing made before a collective needs it)
  EXPECT_EQ(pg.backend_name(), "cpu:gloo");
  Tensor t = full({3}, 2.0);
  pg.allreduce(t, ReduceOp::SUM)->wait();
  pg.broadcast(t, 0)->wait();
  pg.barrier()->wait();
  EXPECT_EQ(made, std::vector<std::string>{"cpu:gloo"});  // made once
  EXPECT_EQ(t.select(0, 0).item<double>(), 2.0);
  DeviceBackendsProcessGroup cuda_only(0, 1, "gpus", std::chrono::seconds(30), "cuda:nccl", {{"cuda", "nccl"}},
                                       [&](const std::string&, const std::string&) -> std::shared_ptr<ProcessGroup> {
                                         throw std::logic_error("not reached");
                                       });
  expect_error<ValueError>([&] { cuda_only.allreduce(t); }, {"allreduce", "'gpus'", "no backend for cpu tensors"});
}

TEST(InitProcessGroup, ClearErrorsForMissingOrMalformedSettings) {
  unsetenv("RANK");
  expect_error<ValueError>([] { init_process_group(); }, {"env://", "RANK is not set"});
  InitOptions o;
  o.init_method = "tcp://127.0.0.1:29500";
  expect_error<ValueError>([&] { init_process_group(o); }, {"rank and world_size"});
  o.init_method = "tcp://127.0.0.1:29500?rank=x&world_size=2";
  expect_error<ValueError>([&] { init_process_group(o); }, {"rank 'x'", "not an integer"});
  o.init_method = "udp://somewhere";
  expect_error<ValueError>([&] { init_process_group(o); }, {"udp://somewhere", "env://", "tcp://", "file://"});
  o.init_method = "env://";
  o.backend = "mpi";
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.world_size = 1;
  expect_error<ValueError>([&] { init_process_group(o); }, {"backend 'mpi'", "gloo"});
  EXPECT_FALSE(is_initialized());
  expect_error<ValueError>([] { get_rank(); }, {"not initialized", "init_process_group"});
  // A one-rank job through file://.
  InitOptions f;
  f.init_method = "file://" + ::testing::TempDir() + "/c10d_init_file?rank=0&world_size=1";
  init_process_group(f);
  EXPECT_EQ(get_rank(), 0);
  EXPECT_EQ(get_world_size(), 1);
  expect_error<ValueError>([&] { init_process_group(f); }, {"already initialized"});
  auto sub = new_group({0});
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->name(), "group_1");
  expect_error<ValueError>([] { new_group({0, 0}); }, {"repeat"});
  destroy_process_group();
  EXPECT_FALSE(is_initialized());
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun
