#pragma once
// What one collective or point-to-point call was, kept unformatted: the op's
// name, its (first) tensor's dtype and shape, and the root or peer, reduce op
// and tag where they apply. The flight recorder keeps one per operation and
// formats it only when dumped ("allreduce(float32 [4], SUM)"): formatting on
// every call would cost more than recording it. Calls over tensor lists
// carry their formatted text instead.
#include <cstdint>
#include <string>
#include <vector>

#include "c10d/reduce_op.h"
#include "tensor/tensor.h"

namespace trainrun {
namespace c10d {

struct CollectiveCall {
  static constexpr int kMaxDims = 8;  // more dimensions are shown as "..."

  const char* name = "";  // a string literal: "allreduce"
  bool has_tensor = false;
  DType dtype{};
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  bool has_reduce = false;
  ReduceOp reduce;
  int root = -1;     // broadcast, reduce, gather, scatter
  int peer = -1;     // send: destination; recv: source (-2: any source)
  int tag = -1;      // point to point
  std::string text;  // set: the whole formatted call (tensor-list ops)

  CollectiveCall() = default;
  explicit CollectiveCall(const char* op) : name(op) {}
  CollectiveCall(const char* op, const Tensor& t) : name(op) { set_tensor(t); }

  CollectiveCall& with_reduce(ReduceOp op) {
    has_reduce = true;
    reduce = op;
    return *this;
  }
  CollectiveCall& with_root(int r) {
    root = r;
    return *this;
  }
  CollectiveCall& with_peer(int p, int t) {
    peer = p;
    tag = t;
    return *this;
  }
  void set_tensor(const Tensor& t);

  // "allreduce(float32 [4], SUM)", "broadcast(float32 [4], root 0)", "send(float32 [2], to 1, tag 0)".
  std::string format() const;
};

// A call over tensor lists, formatted now: "allreduce_coalesced([float32 [4], float32 [2]], SUM)".
CollectiveCall list_call(std::string text);

}  // namespace c10d
}  // namespace trainrun
