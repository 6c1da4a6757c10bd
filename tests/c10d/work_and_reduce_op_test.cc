// Work's completion, waiting and chaining, and the reduction functions the
// backends combine values with.
#include <gtest/gtest.h>

#include <thread>

#include "c10d/reduce_op.h"
#include "c10d/work.h"
#include "tensor/half.h"
#include "tests/expect_error.h"

namespace trainrun {
namespace c10d {
namespace {

using namespace std::chrono_literals;

TEST(Work, WaitThenAndFailures) {
  auto w = std::make_shared<Work>("allreduce #1 on group 'g'");
  EXPECT_FALSE(w->is_completed());
  expect_error<TimeoutError>([&] { w->wait(10ms); }, {"allreduce #1 on group 'g'", "not completed"});
  int ran = 0;
  auto next = w->then([&](Work& done) {
    EXPECT_TRUE(done.is_success());
    ++ran;
  });
  std::thread t([&] { w->finish(); });
  w->wait();
  t.join();
  next->wait();
  EXPECT_EQ(ran, 1);
  auto late = w->then([&](Work&) { ++ran; });  // already complete: runs at once
  EXPECT_TRUE(late->is_completed());
  EXPECT_EQ(ran, 2);

  auto bad = std::make_shared<Work>("broadcast #2");
  auto after = bad->then([&](Work&) { ++ran; });
  bad->finish(std::make_exception_ptr(DistBackendError("broadcast #2: peer 3 closed the connection")));
  expect_error<DistBackendError>([&] { bad->wait(); }, {"peer 3"});
  expect_error<DistBackendError>([&] { after->wait(); }, {"peer 3"});  // failure propagates, callback skipped
  EXPECT_EQ(ran, 2);
  auto throws = w->then([](Work&) { throw ValueError("hook failed"); });
  expect_error<ValueError>([&] { throws->wait(); }, {"hook failed"});
  expect_error<DistBackendError>([&] { wait_all({w, bad, next}); }, {"peer 3"});
}

TEST(ReduceOp, FunctionsPerDtype) {
  float a[3] = {1, -2, 3}, b[3] = {4, 5, -6}, out[3];
  reduce_function(ReduceOp::MAX, DType::Float32)(out, a, b, 3);
  EXPECT_EQ(out[0], 4);
  EXPECT_EQ(out[1], 5);
  EXPECT_EQ(out[2], 3);
  int64_t x[2] = {0b1100, 7}, y[2] = {0b1010, 1}, r[2];
  reduce_function(ReduceOp::BXOR, DType::Int64)(r, x, y, 2);
  EXPECT_EQ(r[0], 0b0110);
  EXPECT_EQ(r[1], 6);
  // f16 adds in float32 and rounds once: 2048 + 1 is not representable (2048), 2048 + 2 is.
  Half h1[2] = {Half(2048.f), Half(2048.f)}, h2[2] = {Half(1.f), Half(2.f)}, hr[2];
  reduce_function(ReduceOp::SUM, DType::Float16)(hr, h1, h2, 2);
  EXPECT_EQ(static_cast<float>(hr[0]), 2048.f);
  EXPECT_EQ(static_cast<float>(hr[1]), 2050.f);
  BFloat16 b1[1] = {BFloat16(1.5f)}, b2[1] = {BFloat16(2.f)}, br[1];
  reduce_function(ReduceOp::PRODUCT, DType::BFloat16)(br, b1, b2, 1);
  EXPECT_EQ(static_cast<float>(br[0]), 3.f);
  bool p[2] = {true, false}, q[2] = {false, false}, o[2];
  reduce_function(ReduceOp::SUM, DType::Bool)(o, p, q, 2);
  EXPECT_TRUE(o[0]);
  EXPECT_FALSE(o[1]);
  expect_error<TypeError>([] { reduce_function(ReduceOp::BAND, DType::Float32); },
                          {"BAND", "integer or bool", "float32"});
  EXPECT_EQ(ReduceOp::premul_sum(0.25).factor, 0.25);
}

}  // namespace
}  // namespace c10d
}  // namespace trainrun
