#include "c10d/collective_call.h"

#include <fmt/format.h>

namespace trainrun {
namespace c10d {

void CollectiveCall::set_tensor(const Tensor& t) {
  has_tensor = true;
  dtype = t.dtype();
  const IntList& s = t.sizes();
  ndim = static_cast<int>(s.size());
  for (int i = 0; i < ndim && i < kMaxDims; ++i) sizes[i] = s[i];
}

std::string CollectiveCall::format() const {
  if (!text.empty()) return text;
  std::string out = fmt::format("{}(", name);
  std::vector<std::string> parts;
  if (has_tensor) {
    std::string shape = "[";
    for (int i = 0; i < ndim && i < kMaxDims; ++i) shape += (i ? ", " : "") + std::to_string(sizes[i]);
    if (ndim > kMaxDims) shape += ", ...";
    parts.push_back(fmt::format("{} {}]", dtype_name(dtype), shape));
  }
  if (peer != -1) parts.push_back(peer == -2 ? "from any" : fmt::format("{} {}", name[0] == 's' ? "to" : "from", peer));
  if (tag != -1) parts.push_back(fmt::format("tag {}", tag));
  if (root >= 0) parts.push_back(fmt::format("root {}", root));
  if (has_reduce) parts.push_back(reduce.name());
  return fmt::format("{}{})", out, fmt::join(parts, ", "));
}

CollectiveCall list_call(std::string text) {
  CollectiveCall c;
  c.text = std::move(text);
  return c;
}

}  // namespace c10d
}  // namespace trainrun
