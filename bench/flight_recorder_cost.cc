// The flight recorder's own cost per collective, without a network's noise:
// a ProcessGroupWrapper (which every group gets, and which records) over a
// backend whose works start and finish at once, timed over many calls.
// bench/agent.py runs it with the recorder on and off
// (TRAINRUN_FR_BUFFER_SIZE) and prints the difference; it prints
// "NS_PER_CALL <median ns over 9 rounds>".
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "c10d/process_group_wrapper.h"
#include "store/hash_store.h"
#include "tensor/factories.h"

namespace trainrun {
namespace c10d {
namespace {

// Every call returns a work that has already started and finished.
class InstantBackend final : public ProcessGroup {
 public:
  InstantBackend() : ProcessGroup(0, 2, "bench", Milliseconds(60000)) {}
  std::string backend_name() const override { return "instant"; }
  std::shared_ptr<Work> done() {
    auto w = std::make_shared<Work>("instant");
    w->mark_started();
    w->finish();
    return w;
  }
  std::shared_ptr<Work> allreduce(Tensor&, ReduceOp) override { return done(); }
  std::shared_ptr<Work> allreduce_coalesced(std::vector<Tensor>&, ReduceOp) override { return done(); }
  std::shared_ptr<Work> broadcast(Tensor&, int) override { return done(); }
  std::shared_ptr<Work> reduce(Tensor&, int, ReduceOp) override { return done(); }
  std::shared_ptr<Work> allgather(std::vector<Tensor>&, const Tensor&) override { return done(); }
  std::shared_ptr<Work> all_gather_into_tensor(Tensor&, const Tensor&) override { return done(); }
  std::shared_ptr<Work> reduce_scatter(Tensor&, std::vector<Tensor>&, ReduceOp) override { return done(); }
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor&, const Tensor&, ReduceOp) override { return done(); }
  std::shared_ptr<Work> alltoall_base(Tensor&, const Tensor&, const IntList&, const IntList&) override {
    return done();
  }
  std::shared_ptr<Work> alltoall(std::vector<Tensor>&, std::vector<Tensor>&) override { return done(); }
  std::shared_ptr<Work> gather(std::vector<Tensor>&, const Tensor&, int) override { return done(); }
  std::shared_ptr<Work> scatter(Tensor&, std::vector<Tensor>&, int) override { return done(); }
  std::shared_ptr<Work> barrier() override { return done(); }
  std::shared_ptr<Work> send(const Tensor&, int, int) override { return done(); }
  std::shared_ptr<Work> recv(Tensor&, int, int) override { return done(); }
  std::shared_ptr<Work> recv_anysource(Tensor&, int) override { return done(); }
};

double median_ns_per_call() {
  ProcessGroupWrapper pg(std::make_shared<InstantBackend>(), std::make_shared<HashStore>(), false);
  Tensor t = ones({1024});  // 4 KiB of float32
  constexpr int kCalls = 200000;
  for (int i = 0; i < kCalls / 10; ++i) pg.allreduce(t)->wait();
  std::vector<double> rounds;
  for (int r = 0; r < 9; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) pg.allreduce(t)->wait();
    rounds.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
                     kCalls);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun

int main() {
  std::printf("NS_PER_CALL %.1f\n", trainrun::c10d::median_ns_per_call());
  return 0;
}
