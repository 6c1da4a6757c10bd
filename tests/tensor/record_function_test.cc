// The operator profiler's recorder (tensor/record_function.h): each dispatcher
// call is one event while a profiler records and none otherwise; an op's
// autograd kernel calling it again below itself is not a second event; named
// ranges hold the ops inside them; record_shapes gives tensor arguments' sizes.
#include "tensor/record_function.h"

#include "tensor/dispatcher.h"
#include "tensor/nn_functional.h"
#include "tests/tensor/test_util.h"

namespace trainrun {

namespace {
Tensor thrice_cpu(const Tensor& x) { return add(x, add(x, x)); }
Tensor thrice_autograd(const Tensor& x) {
  ExcludeDispatchKeyGuard guard(DispatchKey::Autograd);
  return TR_DISPATCH("test::thrice", Tensor(const Tensor&), keys_of(x), x);
}
KernelRegistration<Tensor(const Tensor&)> reg_cpu("test::thrice", DispatchKey::CPU, &thrice_cpu);
KernelRegistration<Tensor(const Tensor&)> reg_ag("test::thrice", DispatchKey::Autograd, &thrice_autograd);

std::vector<std::string> names(const std::vector<profiling::Event>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.name);
  return out;
}
}  // namespace

TEST(RecordFunction, OneEventPerCallOnlyWhileRecording) {
  Tensor x = ft({1, 2});
  add(x, x);  // before: nothing
  profiling::start(/*record_shapes=*/false);
  add(x, x);
  {
    profiling::Range range("outer");
    mul(x, x);
  }
  profiling::stop();
  add(x, x);  // after: nothing
  const std::vector<profiling::Event> events = profiling::events();
  // (events are written as they end: the range after the op inside it)
  EXPECT_EQ(names(events), (std::vector<std::string>{"aten::add", "aten::mul", "outer"}));
  EXPECT_LE(events[2].start_ns, events[1].start_ns);
  EXPECT_GE(events[2].end_ns, events[1].end_ns);
  for (const auto& e : events) EXPECT_TRUE(e.shapes.empty());
}

TEST(RecordFunction, AnOpsOwnRedispatchIsNotASecondEvent) {
  Tensor x = ft({1, 2});
  x.impl()->add_key(DispatchKey::Autograd);
  profiling::start(/*record_shapes=*/true);
  Tensor y = TR_DISPATCH("test::thrice", Tensor(const Tensor&), keys_of(x), x);
  profiling::stop();
  EXPECT_VALUES(y, 3, 6);
  const std::vector<profiling::Event> events = profiling::events();
  // The custom op keeps its namespace; the adds its kernel calls nest inside it.
  EXPECT_EQ(names(events), (std::vector<std::string>{"aten::add", "aten::add", "test::thrice"}));
  EXPECT_EQ(events[2].shapes, (std::vector<IntList>{{2}}));
  ASSERT_GE(events[0].shapes.size(), 3u);  // (add's alpha: not a tensor)
  EXPECT_EQ(events[0].shapes[0], IntList{2});
  EXPECT_EQ(events[0].shapes[2], IntList{});
}

TEST(RecordFunction, RecordShapesKeepsIntegerArgumentsValues) {
  // A convolution's stride, padding, dilation and groups (its FLOP count needs the output's size).
  Tensor x = full({1, 2, 5, 5}, 1.0, TensorOptions(DType::Float32));
  Tensor w = full({4, 1, 3, 3}, 1.0, TensorOptions(DType::Float32));
  profiling::start(/*record_shapes=*/true);
  Tensor y = conv2d(x, w, {}, {2, 2}, {1, 1}, {1, 1}, 2);
  profiling::stop();
  const std::vector<profiling::Event> events = profiling::events();
  ASSERT_EQ(names(events), (std::vector<std::string>{"aten::conv2d"}));
  EXPECT_EQ(events[0].shapes[0], (IntList{1, 2, 5, 5}));
  EXPECT_EQ(events[0].concrete, (std::vector<IntList>{{}, {}, {}, {2, 2}, {1, 1}, {1, 1}, {2}}));
  EXPECT_EQ(y.sizes(), (IntList{1, 4, 3, 3}));
}

TEST(RecordFunction, ProfileMemoryGivesEachEventItsNetAllocation) {
  Tensor x = full({1024}, 1.0, TensorOptions(DType::Float32));
  profiling::start(/*record_shapes=*/false, /*profile_memory=*/true);
  {
    profiling::Range range("outer");
    Tensor y = add(x, x);  // 4096 bytes, freed before the range ends
  }
  profiling::stop();
  const std::vector<profiling::Event> events = profiling::events();
  ASSERT_EQ(names(events), (std::vector<std::string>{"aten::add", "outer"}));
  EXPECT_EQ(events[0].memory, 4096);
  EXPECT_EQ(events[1].memory, 0);
  profiling::start(false);  // without profile_memory: nothing counted
  add(x, x);
  profiling::stop();
  EXPECT_EQ(profiling::events()[0].memory, 0);
}

TEST(RecordFunction, AStartClearsWhatAnEarlierProfileLeft) {
  profiling::start(false);
  Tensor x = ft({1});
  add(x, x);
  profiling::stop();
  EXPECT_EQ(profiling::num_events(), 1u);
  profiling::start(false);
  EXPECT_EQ(profiling::num_events(), 0u);
  profiling::stop();
  EXPECT_THROW(profiling::stop(), ValueError);
}

}  // namespace trainrun
