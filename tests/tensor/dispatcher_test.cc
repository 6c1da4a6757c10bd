#include "tensor/dispatcher.h"

#include "tests/tensor/test_util.h"

namespace trainrun {

namespace {
Tensor twice_cpu(const Tensor& x) { return mul(x, 2); }
int autograd_calls = 0;
Tensor twice_autograd(const Tensor& x) {
  ++autograd_calls;
  ExcludeDispatchKeyGuard guard(DispatchKey::Autograd);
  return TR_DISPATCH("test::twice", Tensor(const Tensor&), keys_of(x), x);
}
KernelRegistration<Tensor(const Tensor&)> reg_cpu("test::twice", DispatchKey::CPU, &twice_cpu);
KernelRegistration<Tensor(const Tensor&)> reg_ag("test::twice", DispatchKey::Autograd, &twice_autograd);
}  // namespace

TEST(Dispatcher, CustomOpRoutesByKeyAndRedispatches) {
  Tensor x = ft({1, 2});
  EXPECT_VALUES(TR_DISPATCH("test::twice", Tensor(const Tensor&), keys_of(x), x), 2, 4);
  EXPECT_EQ(autograd_calls, 0);
  x.impl()->add_key(DispatchKey::Autograd);
  EXPECT_VALUES(TR_DISPATCH("test::twice", Tensor(const Tensor&), keys_of(x), x), 2, 4);
  EXPECT_EQ(autograd_calls, 1);
  // Ops with no autograd kernel fall through to the backend.
  EXPECT_VALUES(add(x, 1), 2, 3);
}

TEST(Dispatcher, ErrorsNameTheOp) {
  expect_error<TypeError>([] { Op<Tensor(const Tensor&, int)>("test::twice"); }, {"test::twice", "signature"});
  expect_error<ValueError>([] { KernelRegistration<Tensor(const Tensor&)>("test::twice", DispatchKey::CPU, &twice_cpu); },
                           {"test::twice", "already has a kernel"});
  Tensor x = ft({1});
  static const Op<Tensor(const Tensor&)> missing("test::missing");
  expect_error<NotImplementedError>([&] { missing.call(keys_of(x), x); }, {"test::missing", "CPU"});
}

}  // namespace trainrun
