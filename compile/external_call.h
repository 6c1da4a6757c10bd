#pragma once
// A call a graph makes to code outside the dispatcher (a custom op written
// in Python: trainrun.library.custom_op): recorded as one opaque node, whose
// inner ops are not recorded, and replayed by making the call again. Under
// autograd the call attaches its own backward, as it did when recorded.
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace trainrun::compile {

class ExternalCall {
 public:
  virtual ~ExternalCall() = default;
  virtual std::string name() const = 0;  // "mylib::mysin"
  // The op and its arguments other than tensors: two recordings make the same call when their keys match.
  virtual std::string key() const { return name(); }
  // The call's tensor results for these tensor arguments (in the recorded positions).
  virtual std::vector<Tensor> call(const std::vector<Tensor>& inputs) const = 0;
};

}  // namespace trainrun::compile
