#include "c10d/process_group.h"

#include "base/error.h"

namespace trainrun {
namespace c10d {

void ProcessGroup::check_rank(int r, const char* op, const char* what) const {
  TR_CHECK(r >= 0 && r < size_, ValueError, "{} on group '{}': {} {} is not a rank of this group of size {}", op, name_,
           what, r, size_);
}

void ProcessGroup::set_global_ranks(std::vector<int> ranks) {
  TR_CHECK(static_cast<int>(ranks.size()) == size_, ValueError,
           "group '{}' has {} members but {} global ranks were given", name_, size_, ranks.size());
  global_ranks_ = std::move(ranks);
}

std::vector<std::shared_ptr<Work>> ProcessGroup::batch_isend_irecv(std::vector<P2POp>& ops) {
  std::vector<std::shared_ptr<Work>> works;
  works.reserve(ops.size());
  for (P2POp& op : ops)
    works.push_back(op.kind == P2POp::SEND ? send(op.tensor, op.peer, op.tag) : recv(op.tensor, op.peer, op.tag));
  return works;
}

}  // namespace c10d
}  // namespace trainrun
