#pragma once
// What every c10d_worker scenario checks with: this rank's place, and
// failures that print what differed and end the process with status 1.
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <string>

#include "c10d/distributed.h"
#include "tensor/ops.h"

namespace trainrun {
namespace c10d {

inline int g_rank = 0, g_world = 1;  // set once the group is up

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: FAILED: %s\n", g_rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

inline void expect(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

inline void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype())
    fail(fmt::format("{}: got {} {}, want {} {}", what, dtype_name(got.dtype()), got.shape_str(),
                     dtype_name(want.dtype()), want.shape_str()));
  const double tol = got.dtype() == DType::Float16 || got.dtype() == DType::BFloat16 ? 1e-2 : 1e-6;
  Tensor a = got.to(DType::Float64), b = want.to(DType::Float64);
  if (!allclose(a, b, tol, tol))
    fail(fmt::format("{}: values differ\n got  {}\n want {}", what, got.str(), want.str()));
}

// A scenario's membership of the default group (env://, the launcher's
// store): joined on construction (setting g_rank and g_world), destroyed at
// the end of the scenario.
class JoinedGroup {
 public:
  explicit JoinedGroup(std::chrono::milliseconds timeout, const std::string& backend = "gloo") {
    InitOptions o;
    o.backend = backend;
    o.timeout = timeout;
    init_process_group(o);
    g_rank = get_rank();
    g_world = get_world_size();
  }
  ~JoinedGroup() { destroy_process_group(); }
  JoinedGroup(const JoinedGroup&) = delete;
  JoinedGroup& operator=(const JoinedGroup&) = delete;
};

// The DDP scenario (ddp_scenario.cc).
void ddp_scenario();

}  // namespace c10d
}  // namespace trainrun
