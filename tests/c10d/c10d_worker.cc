// One rank of a multi-process c10d test (tests/c10d/process_group_test.cc
// runs N of them under trainrun, through tests/multirank): each scenario
// joins the default group through env:// and checks every result against
// what the ranks' inputs imply. Exits 0 when every check passed; prints the
// first failure otherwise.
//   trainrun --nproc-per-node N --no-python c10d_worker SCENARIO
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "c10d/distributed.h"
#include "tensor/ops.h"
#include "tests/c10d/worker_checks.h"
#include "tests/multirank/scenario.h"

using namespace trainrun;
using namespace trainrun::c10d;
using namespace std::chrono_literals;

namespace {

// What rank r contributes: small integers (1..5 + r) that every dtype holds
// exactly, so that products over four ranks stay exact in int32.
Tensor input_of(int r, DType dt, const IntList& shape = {2, 3}) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return add(remainder(arange(n), 5), r + 1).view(shape).to(dt);
}

// The elementwise reduction over every rank's input, computed locally.
Tensor expected_reduction(ReduceOp op, DType dt, const IntList& shape = {2, 3}) {
  Tensor acc = input_of(0, DType::Float64, shape);
  for (int r = 1; r < g_world; ++r) {
    Tensor x = input_of(r, DType::Float64, shape);
    switch (op.kind) {
      case ReduceOp::SUM:
      case ReduceOp::AVG:
        acc = add(acc, x);
        break;
      case ReduceOp::PREMUL_SUM:
        acc = add(acc, x);
        break;
      case ReduceOp::PRODUCT:
        acc = mul(acc, x);
        break;
      case ReduceOp::MIN:
        acc = minimum(acc, x);
        break;
      case ReduceOp::MAX:
        acc = maximum(acc, x);
        break;
      default:
        break;
    }
  }
  if (op.kind == ReduceOp::AVG)
    acc = is_floating(dt) ? div(acc, g_world) : div(acc, scalar_tensor(g_world, DType::Float64), "trunc");
  if (op.kind == ReduceOp::PREMUL_SUM) acc = mul(acc, op.factor);
  if (op.kind == ReduceOp::BAND || op.kind == ReduceOp::BOR || op.kind == ReduceOp::BXOR) {
    Tensor a = input_of(0, DType::Int64, shape);
    for (int r = 1; r < g_world; ++r) {
      Tensor x = input_of(r, DType::Int64, shape);
      a = op.kind == ReduceOp::BAND  ? bitwise_and(a, x)
          : op.kind == ReduceOp::BOR ? bitwise_or(a, x)
                                     : bitwise_xor(a, x);
    }
    return a.to(dt);
  }
  return acc.to(dt);
}

void collectives() {
  auto pg = default_group();
  const DType all_dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                              DType::Int64,   DType::Int32,   DType::UInt8};
  for (DType dt : all_dtypes) {
    std::vector<ReduceOp> ops = {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::AVG};
    if (is_floating(dt))
      ops.push_back(ReduceOp::premul_sum(0.5));
    else
      ops.insert(ops.end(), {ReduceOp::BAND, ReduceOp::BOR, ReduceOp::BXOR});
    for (ReduceOp op : ops) {
      if (dt == DType::UInt8 && op.kind == ReduceOp::PRODUCT) continue;  // 5^4 overflows a byte
      Tensor t = input_of(g_rank, dt);
      pg->allreduce(t, op)->wait();
      expect_equal(t, expected_reduction(op, dt), fmt::format("allreduce {} {}", op.name(), dtype_name(dt)));
    }
  }
  // Integer AVG truncates toward zero (as NCCL does), also below zero: rank
  // 0's -1 averages to 0 (floor would give -1) at every world size.
  for (DType dt : {DType::Int64, DType::Int32}) {
    const auto contribution = [](int r) {
      return tensor<int64_t>({r == 0 ? -1 : 0, -2 * r - 1, 3 - 2 * r, -5, 7 * r - 9}, {5});
    };
    Tensor t = contribution(g_rank).to(dt);
    pg->allreduce(t, ReduceOp::AVG)->wait();
    Tensor total = zeros({5}, DType::Float64);
    for (int r = 0; r < g_world; ++r) total = add(total, contribution(r).to(DType::Float64));
    expect_equal(t, div(total, scalar_tensor(g_world, DType::Float64), "trunc").to(dt),
                 fmt::format("allreduce AVG of negative {}", dtype_name(dt)));
    expect(narrow(t, 0, 0, 1).to(DType::Int64).item<int64_t>() == 0, "integer AVG rounds -1/n toward zero");
  }
  // A non-contiguous tensor (a transposed view) is reduced in place.
  Tensor base = input_of(g_rank, DType::Float32).t().contiguous();
  Tensor view = base.t();
  pg->allreduce(view, ReduceOp::SUM)->wait();
  expect_equal(view, expected_reduction(ReduceOp::SUM, DType::Float32), "allreduce of a transposed view");
  // Bools: SUM is OR, PRODUCT is AND.
  Tensor flags = tensor<bool>({g_rank == 0, true}, {2});
  pg->allreduce(flags, ReduceOp::SUM)->wait();
  expect_equal(flags, tensor<bool>({true, true}, {2}), "allreduce SUM of bools");
  // Large buffers: several of Gloo's 1 MiB segments and of the shared-memory
  // transport's 4 MiB chunks, with an odd element count.
  const int64_t big_n = (1 << 21) + 3;
  Tensor big = add(mul(arange(big_n).to(DType::Float32), 1e-3), static_cast<double>(g_rank));
  pg->allreduce(big)->wait();
  Tensor big_want = add(mul(arange(big_n).to(DType::Float32), 1e-3 * g_world), g_world * (g_world - 1) / 2.0);
  expect(allclose(big, big_want, 1e-5, 1e-3), "allreduce of 8 MiB + 12 bytes");
  // The data depend on position (never constants), so a piece, slot or
  // slice read from the wrong offset shows. float32 holds all of it exactly:
  // arange up to 4 ranks * 2M, and residues mod 65521 times at most 10.
  Tensor big_gathered = empty({g_world * big_n}, DType::Float32);
  pg->all_gather_into_tensor(big_gathered, add(arange(big_n), g_rank * big_n).to(DType::Float32))->wait();
  expect(allclose(big_gathered, arange(g_world * big_n).to(DType::Float32), 0, 0), "all_gather_into_tensor of 8 MiB per rank");
  const Tensor pattern = remainder(arange(g_world * big_n), 65521).to(DType::Float32);
  Tensor big_scattered = empty({big_n}, DType::Float32);
  pg->reduce_scatter_tensor(big_scattered, mul(pattern, g_rank + 1), ReduceOp::AVG)->wait();
  expect(allclose(big_scattered, mul(narrow(pattern, 0, g_rank * big_n, big_n), (g_world + 1) / 2.0), 0, 0),
         "reduce_scatter_tensor AVG of 8 MiB per rank");
  Tensor big_bcast = add(arange(big_n), g_rank).to(DType::Float32);
  pg->broadcast(big_bcast, g_world - 1)->wait();
  expect(allclose(big_bcast, add(arange(big_n), g_world - 1).to(DType::Float32), 0, 0), "broadcast of 8 MiB");

  std::vector<Tensor> coalesced = {input_of(g_rank, DType::Float32), input_of(g_rank, DType::Float32, {4})};
  pg->allreduce_coalesced(coalesced)->wait();
  expect_equal(coalesced[0], expected_reduction(ReduceOp::SUM, DType::Float32), "allreduce_coalesced [0]");
  expect_equal(coalesced[1], expected_reduction(ReduceOp::SUM, DType::Float32, {4}), "allreduce_coalesced [1]");

  // Coalesced all-gather and reduce-scatter (FSDP's per-group collectives):
  // tensors of different shapes, one collective, each output as if gathered
  // or reduced alone. Values depend on rank, tensor and position.
  {
    // The last one spans several shared-memory slots (4 MiB), its windows starting inside pieces.
    const IntList shapes[] = {{3}, {2, 5}, {1}, {4, 1, 2}, {(1 << 20) + 5}};
    std::vector<Tensor> ins, outs, rs_ins, rs_outs;
    for (size_t i = 0; i < 5; ++i) {
      int64_t n = 1;
      for (int64_t s : shapes[i]) n *= s;
      ins.push_back(add(arange(n), 1000.0 * g_rank + 100.0 * i).to(DType::Float64).view(shapes[i]));
      IntList out_shape = shapes[i];
      out_shape[0] *= g_world;
      outs.push_back(empty(out_shape, DType::Float64));
      rs_ins.push_back(mul(add(arange(g_world * n), 100.0 * i), g_rank + 1).to(DType::Float64));
      rs_outs.push_back(empty(shapes[i], DType::Float64));
    }
    // The backend numbers its collectives: consecutive numbers mean one each.
    // (Between the ranks of one host the backend runs the coalesced op itself, else the packed single op.)
    const auto number_of = [](const std::shared_ptr<Work>& w, const char* op) {
      const std::string& d = w->description();
      const std::string coalesced = std::string(op) == "all_gather_into_tensor" ? "allgather_into_tensor_coalesced"
                                                                                : "reduce_scatter_tensor_coalesced";
      expect((d.rfind(op, 0) == 0 || d.rfind(coalesced, 0) == 0) && d.find('#') != std::string::npos,
             d + " should run as one " + op);
      return std::stol(d.substr(d.find('#') + 1));
    };
    Tensor marker = ones({1});
    const long first = number_of(pg->allreduce(marker), "allreduce");
    auto gather_work = pg->allgather_into_tensor_coalesced(outs, ins);
    auto scatter_work = pg->reduce_scatter_tensor_coalesced(rs_outs, rs_ins, ReduceOp::SUM);
    gather_work->wait();
    scatter_work->wait();
    expect(number_of(gather_work, "all_gather_into_tensor") == first + 1 &&
               number_of(scatter_work, "reduce_scatter_tensor") == first + 2,
           "each coalesced call is exactly one collective of the backend");
    for (size_t i = 0; i < 5; ++i) {
      const int64_t n = ins[i].numel();
      for (int r = 0; r < g_world; ++r)
        expect_equal(narrow(outs[i].view({-1}), 0, r * n, n), add(arange(n), 1000.0 * r + 100.0 * i).to(DType::Float64),
                     fmt::format("allgather_into_tensor_coalesced tensor {} from rank {}", i, r));
      const double rank_factor = g_world * (g_world + 1) / 2.0;  // sum of (r + 1)
      expect_equal(rs_outs[i].view({-1}),
                   mul(add(narrow(arange(g_world * n), 0, g_rank * n, n), 100.0 * i), rank_factor).to(DType::Float64),
                   fmt::format("reduce_scatter_tensor_coalesced tensor {}", i));
    }
    std::vector<Tensor> one_out = {empty({2}, DType::Float64)}, wrong_in = {ones({3}, DType::Float64)};
    try {
      pg->allgather_into_tensor_coalesced(one_out, wrong_in);
      fail("allgather_into_tensor_coalesced accepted an output of the wrong size");
    } catch (const ValueError& e) {
      expect(std::strstr(e.what(), "output 0 is [2] but input 0 is [3]") != nullptr, e.what());
    }
  }

  for (int root = 0; root < g_world; ++root) {
    Tensor b = input_of(g_rank, DType::BFloat16);
    pg->broadcast(b, root)->wait();
    expect_equal(b, input_of(root, DType::BFloat16), fmt::format("broadcast from {}", root));
    Tensor r = input_of(g_rank, DType::Int32);
    pg->reduce(r, root, ReduceOp::MAX)->wait();
    expect_equal(r, g_rank == root ? expected_reduction(ReduceOp::MAX, DType::Int32) : input_of(g_rank, DType::Int32),
                 fmt::format("reduce MAX to {}", root));
    // AVG to a root: the root divides (integers truncate), the others keep their input.
    for (DType dt : {DType::Float32, DType::Int64}) {
      Tensor avg = input_of(g_rank, dt);
      pg->reduce(avg, root, ReduceOp::AVG)->wait();
      if (g_rank == root)
        expect_equal(avg, expected_reduction(ReduceOp::AVG, dt), fmt::format("reduce AVG {} to {}", dtype_name(dt), root));
    }
  }

  std::vector<Tensor> gathered;
  for (int r = 0; r < g_world; ++r) gathered.push_back(empty({2, 3}, DType::Float16));
  pg->allgather(gathered, input_of(g_rank, DType::Float16))->wait();
  for (int r = 0; r < g_world; ++r) expect_equal(gathered[r], input_of(r, DType::Float16), "allgather");
  Tensor into = empty({g_world * 2, 3}, DType::Int64);
  pg->all_gather_into_tensor(into, input_of(g_rank, DType::Int64))->wait();
  for (int r = 0; r < g_world; ++r)
    expect_equal(narrow(into, 0, 2 * r, 2), input_of(r, DType::Int64), "all_gather_into_tensor");

  // reduce_scatter_tensor: rank r's input is [world * 2, 3]; out = sum over ranks of chunk r.
  Tensor rs_in = add(arange(g_world * 6).view({g_world * 2, 3}), g_rank).to(DType::Float32);
  Tensor rs_out = empty({2, 3});
  pg->reduce_scatter_tensor(rs_out, rs_in)->wait();
  Tensor want = zeros({g_world * 2, 3});
  for (int r = 0; r < g_world; ++r)
    want = add(want, add(arange(g_world * 6).view({g_world * 2, 3}), r).to(DType::Float32));
  expect_equal(rs_out, narrow(want, 0, 2 * g_rank, 2), "reduce_scatter_tensor");
  std::vector<Tensor> rs_list;
  for (int r = 0; r < g_world; ++r) rs_list.push_back(full({3}, static_cast<double>(r * 10 + g_rank)));
  Tensor rs_one = empty({3});
  pg->reduce_scatter(rs_one, rs_list, ReduceOp::MIN)->wait();
  expect_equal(rs_one, full({3}, static_cast<double>(g_rank * 10)), "reduce_scatter MIN");

  // alltoall_base of a strided view (DTensor's Shard(0) -> Shard(1) passes one): row r of the permuted
  // view, rank r's chunk, goes straight from the strided input. Small, and large enough that each chunk
  // crosses several shared-memory slices and splits rows between them.
  for (int64_t cols : {int64_t{5}, int64_t{1000}}) {
    const int64_t rows = cols == 5 ? 3 : 700;
    auto base_of = [&](int r) {
      return add(arange(rows * g_world * cols).to(DType::Float32), 1e6 * r).view({rows, g_world * cols});
    };
    Tensor strided = base_of(g_rank).view({rows, g_world, cols}).permute({1, 0, 2});
    expect(!strided.is_contiguous(), "the input is a strided view");
    Tensor got = empty({g_world, rows, cols});
    pg->alltoall_base(got, strided)->wait();
    for (int s = 0; s < g_world; ++s)
      expect_equal(got.select(0, s), base_of(s).view({rows, g_world, cols}).select(1, g_rank),
                   fmt::format("alltoall_base of a strided view ({} x {}) from rank {}", rows, cols, s));
  }

  // alltoall_base with uneven splits: rank r sends (d + 1) rows to rank d,
  // each row filled with 100 * r + d.
  IntList in_splits, out_splits;
  std::vector<Tensor> rows;
  for (int d = 0; d < g_world; ++d) {
    in_splits.push_back(d + 1);
    rows.push_back(full({d + 1, 2}, 100.0 * g_rank + d, DType::Int64));
  }
  for (int s = 0; s < g_world; ++s) out_splits.push_back(g_rank + 1);
  Tensor a2a_out = empty({(g_rank + 1) * g_world, 2}, DType::Int64);
  pg->alltoall_base(a2a_out, cat(rows, 0), out_splits, in_splits)->wait();
  for (int s = 0; s < g_world; ++s)
    expect_equal(narrow(a2a_out, 0, s * (g_rank + 1), g_rank + 1),
                 full({g_rank + 1, 2}, 100.0 * s + g_rank, DType::Int64), fmt::format("alltoall_base rows from {}", s));
  std::vector<Tensor> a2a_in, a2a_outs;
  for (int d = 0; d < g_world; ++d) {
    a2a_in.push_back(full({g_rank + 1}, static_cast<double>(g_rank)));
    a2a_outs.push_back(empty({d + 1}));
  }
  pg->alltoall(a2a_outs, a2a_in)->wait();
  for (int s = 0; s < g_world; ++s) expect_equal(a2a_outs[s], full({s + 1}, static_cast<double>(s)), "alltoall list");

  const int root = g_world - 1;
  std::vector<Tensor> gather_out;
  if (g_rank == root)
    for (int r = 0; r < g_world; ++r) gather_out.push_back(empty({2, 3}, DType::Float64));
  pg->gather(gather_out, input_of(g_rank, DType::Float64), root)->wait();
  if (g_rank == root)
    for (int r = 0; r < g_world; ++r) expect_equal(gather_out[r], input_of(r, DType::Float64), "gather");
  std::vector<Tensor> scatter_in;
  if (g_rank == root)
    for (int r = 0; r < g_world; ++r) scatter_in.push_back(input_of(r * 2, DType::Int32));
  Tensor scatter_out = empty({2, 3}, DType::Int32);
  pg->scatter(scatter_out, scatter_in, root)->wait();
  expect_equal(scatter_out, input_of(g_rank * 2, DType::Int32), "scatter");
  pg->barrier()->wait();

  // Bad input is refused on the calling thread with a clear message.
  try {
    Tensor f = zeros({2});
    pg->allreduce(f, ReduceOp::BXOR);
    fail("BXOR on floats was accepted");
  } catch (const TypeError& e) {
    expect(std::strstr(e.what(), "BXOR") != nullptr, e.what());
  }
  try {
    std::vector<Tensor> too_few = {empty({2, 3})};
    pg->allgather(too_few, input_of(g_rank, DType::Float32));
    if (g_world != 1) fail("allgather with one output was accepted");
  } catch (const ValueError& e) {
    expect(std::strstr(e.what(), "output tensors") != nullptr, e.what());
  }
}

void point_to_point() {
  auto pg = default_group();
  const int next = (g_rank + 1) % g_world, prev = (g_rank + g_world - 1) % g_world;
  // A ring: everyone sends to next and receives from prev at once.
  Tensor out = full({1000}, static_cast<double>(g_rank));
  Tensor in = empty({1000});
  auto s = pg->send(out, next, 3);
  auto r = pg->recv(in, prev, 3);
  r->wait();
  s->wait();
  expect_equal(in, full({1000}, static_cast<double>(prev)), "ring recv");
  // Tags keep two messages between the same pair apart (sent in one order, received in the other).
  if (g_rank == 0) {
    pg->send(full({2}, 7.0), 1, 7)->wait();
    pg->send(full({2}, 8.0), 1, 8)->wait();
  } else if (g_rank == 1) {
    Tensor a = empty({2}), b = empty({2});
    auto wb = pg->recv(b, 0, 8);
    auto wa = pg->recv(a, 0, 7);
    wa->wait();
    wb->wait();
    expect_equal(a, full({2}, 7.0), "tag 7");
    expect_equal(b, full({2}, 8.0), "tag 8");
  }
  // Receive from any source: rank 0 hears from every other rank once.
  if (g_rank == 0) {
    std::vector<bool> seen(g_world, false);
    for (int i = 1; i < g_world; ++i) {
      Tensor t = empty({1}, DType::Int64);
      auto w = pg->recv_anysource(t, 11);
      w->wait();
      expect(w->source_rank() == t.item<int64_t>(), "recv_anysource source_rank");
      seen[w->source_rank()] = true;
    }
    for (int i = 1; i < g_world; ++i) expect(seen[i], "recv_anysource heard every rank");
  } else {
    pg->send(full({1}, static_cast<double>(g_rank), DType::Int64), 0, 11)->wait();
  }
  // batch_isend_irecv: exchange with both neighbours.
  Tensor from_prev = empty({3}), from_next = empty({3});
  std::vector<P2POp> ops = {{P2POp::SEND, full({3}, g_rank + 0.5), next, 5},
                            {P2POp::SEND, full({3}, g_rank + 0.25), prev, 6},
                            {P2POp::RECV, from_prev, prev, 5},
                            {P2POp::RECV, from_next, next, 6}};
  wait_all(pg->batch_isend_irecv(ops));
  expect_equal(from_prev, full({3}, prev + 0.5), "batch_isend_irecv from prev");
  expect_equal(from_next, full({3}, next + 0.25), "batch_isend_irecv from next");
  pg->barrier()->wait();
}

void async_and_groups() {
  auto pg = default_group();
  // Several works in flight, waited in reverse order; then() chains.
  std::vector<Tensor> ts;
  std::vector<std::shared_ptr<Work>> works;
  std::atomic<int> callbacks{0};
  for (int i = 0; i < 8; ++i) {
    ts.push_back(full({256}, static_cast<double>(i + g_rank)));
    works.push_back(pg->allreduce(ts.back()));
  }
  auto chained = works[3]->then([&](Work& w) {
    expect(w.is_success(), "then() runs after success");
    ++callbacks;
  });
  for (int i = 7; i >= 0; --i) {
    works[i]->wait();
    expect(works[i]->is_completed() && works[i]->is_success(), "completed");
    const double want = g_world * i + g_world * (g_world - 1) / 2.0;
    expect(ts[i].select(0, 0).item<double>() == want, fmt::format("out-of-order wait {}", i));
  }
  chained->wait();
  expect(callbacks == 1, "then() ran once");
  // wait(timeout) on a receive nobody sends: TimeoutError naming it, quickly.
  Tensor never = empty({1});
  auto lonely = pg->recv(never, (g_rank + 1) % g_world, 99);
  auto t0 = std::chrono::steady_clock::now();
  try {
    lonely->wait(200ms);
    fail("wait(200ms) on a receive nobody sends returned");
  } catch (const TimeoutError& e) {
    expect(std::strstr(e.what(), "recv") != nullptr && std::strstr(e.what(), "tag 99") != nullptr, e.what());
  }
  expect(std::chrono::steady_clock::now() - t0 < 5s, "wait(timeout) returned in time");
  // Once every rank has checked (the barrier), unblock the lonely receives so
  // that the group can shut down cleanly.
  pg->barrier()->wait();
  pg->send(full({1}, 1.0), (g_rank + g_world - 1) % g_world, 99)->wait();
  lonely->wait();

  // Subgroups: evens and odds run interleaved with the default group.
  std::vector<int> evens, odds;
  for (int r = 0; r < g_world; ++r) (r % 2 == 0 ? evens : odds).push_back(r);
  auto ge = new_group(evens);
  auto go = new_group(odds);
  auto mine = g_rank % 2 == 0 ? ge : go;
  expect(mine != nullptr && (g_rank % 2 == 0 ? go : ge) == nullptr, "membership of new_group");
  const auto& members = g_rank % 2 == 0 ? evens : odds;
  expect(mine->size() == static_cast<int>(members.size()), "subgroup size");
  for (int i = 0; i < 5; ++i) {
    Tensor a = full({64}, static_cast<double>(g_rank)), b = full({64}, 1.0);
    auto wa = mine->allreduce(a);
    auto wb = pg->allreduce(b);
    wb->wait();
    wa->wait();
    double want = 0;
    for (int m : members) want += m;
    expect(a.select(0, 0).item<double>() == want, "subgroup allreduce");
    expect(b.select(0, 0).item<double>() == g_world, "default group allreduce beside it");
  }
  destroy_process_group(mine);
  pg->barrier()->wait();
}

// The last rank exits mid-job; every other rank's next collectives fail
// within the group timeout, naming the op and the group, and nothing hangs.
void peer_dies() {
  auto pg = default_group();
  Tensor t = ones({4});
  pg->allreduce(t)->wait();
  if (g_rank == g_world - 1) std::_Exit(0);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) {
    try {
      pg->allreduce(t)->wait();
      fail("allreduce with a dead peer succeeded");
    } catch (const DistBackendError& e) {
      expect(std::strstr(e.what(), "allreduce") != nullptr && std::strstr(e.what(), "group 'default'") != nullptr,
             std::string("error names the op and group: ") + e.what());
      if (i == 0) std::fprintf(stderr, "rank %d saw: %s\n", g_rank, e.what());
    }
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  expect(took < 20s, fmt::format("failed within the timeout (took {} ms)",
                                 std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
}

// Rank 1 stops taking part (it sleeps past the group timeout): rank 0's
// next collective fails after the timeout, saying rank 1 had not entered it.
void late_rank() {
  auto pg = default_group();
  Tensor t = ones({4});
  pg->allreduce(t)->wait();
  if (g_rank != 0) {
    std::this_thread::sleep_for(5s);
    std::_Exit(0);
  }
  auto t0 = std::chrono::steady_clock::now();
  try {
    pg->allreduce(t)->wait();
    fail("allreduce without rank 1 succeeded");
  } catch (const DistBackendError& e) {
    std::fprintf(stderr, "rank %d saw: %s\n", g_rank, e.what());
    expect(std::strstr(e.what(), "had not entered #2: 1 (last at #1)") != nullptr, e.what());
  }
  expect(std::chrono::steady_clock::now() - t0 < 5s, "the timeout was honoured");
  std::_Exit(0);
}

// Debug mode: ranks that call different collectives hear about it, both sides named.
void mismatch() {
  auto pg = default_group();
  Tensor t = ones({g_rank == 0 ? 4 : 5});
  try {
    pg->allreduce(t)->wait();
    fail("mismatched allreduce succeeded");
  } catch (const DistBackendError& e) {
    std::fprintf(stderr, "rank %d saw: %s\n", g_rank, e.what());
    expect(std::strstr(e.what(), "does not match across ranks") != nullptr &&
               std::strstr(e.what(), "allreduce(float32 [4], SUM)") != nullptr &&
               std::strstr(e.what(), "allreduce(float32 [5], SUM)") != nullptr,
           e.what());
  }
}

// Each scenario joins the default group (env://) with its own timeout.
TR_RANK_SCENARIO(collectives) {
  JoinedGroup g(60s);
  collectives();
}
TR_RANK_SCENARIO(p2p) {
  JoinedGroup g(60s);
  point_to_point();
}
TR_RANK_SCENARIO(async) {
  JoinedGroup g(60s);
  async_and_groups();
}
TR_RANK_SCENARIO(peer_dies) {
  JoinedGroup g(10s);
  peer_dies();
}
TR_RANK_SCENARIO(late_rank) {
  JoinedGroup g(2s);
  late_rank();
}
TR_RANK_SCENARIO(mismatch) {
  setenv("TRAINRUN_DISTRIBUTED_DEBUG", "DETAIL", 1);
  JoinedGroup g(60s);
  mismatch();
}
TR_RANK_SCENARIO(ddp) {
  JoinedGroup g(60s);
  ddp_scenario();
}

}  // namespace

int main(int argc, char** argv) { return trainrun::multirank::run_scenario_main(argc, argv); }
