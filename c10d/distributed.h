#pragma once
// Group management, as torch.distributed's module-level functions:
// init_process_group creates the default group from an init method
// ("env://", "tcp://host:port", "file:///path") or a given store;
// new_group makes subgroups; get_rank/get_world_size read the default group.
// The state is per process (one default group), guarded by a mutex.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "c10d/process_group.h"
#include "store/store.h"

namespace trainrun {
namespace c10d {

struct InitOptions {
  std::string backend = "gloo";
  // Ignored when `store` is given. env:// reads MASTER_ADDR, MASTER_PORT
  // and (unless given here) RANK and WORLD_SIZE; tcp:// and file:// take
  // rank and world_size from here or from "?rank=R&world_size=N". Rank 0
  // hosts the TCP store, unless TORCHELASTIC_USE_AGENT_STORE=True says a
  // launcher already does.
  std::string init_method = "env://";
  int rank = -1, world_size = -1;
  Milliseconds timeout{1800000};
  std::shared_ptr<Store> store;
};

// Makes the groups of one backend. Each backend registers itself when its
// library is linked ("gloo" by //c10d/gloo, "nccl" by //c10d/nccl). `store`
// is already prefixed for the group.
using BackendFactory = std::function<std::shared_ptr<ProcessGroup>(
    std::shared_ptr<Store> store, int rank, int size, const std::string& name, Milliseconds timeout)>;
void register_backend(const std::string& name, BackendFactory factory);
// The registered backends, sorted.
std::vector<std::string> available_backends();

// Throws ValueError naming what is missing or malformed; DistBackendError
// when the ranks cannot connect within the timeout.
void init_process_group(const InitOptions& options = {});
bool is_initialized();
// The default group; throws ValueError when init_process_group has not run.
std::shared_ptr<ProcessGroup> default_group();
int get_rank();
int get_world_size();
// The store the default group rendezvoused through (unprefixed).
std::shared_ptr<Store> default_store();

// A group of `ranks` (of the default group; empty: all). Every rank of the
// default group must call it, in the same order; ranks outside the group get
// null (PyTorch's GROUP_MEMBER.NON_GROUP_MEMBER).
std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks = {},
                                        std::optional<Milliseconds> timeout = std::nullopt);

// Destroys `group`, or every group (and the default) when null.
void destroy_process_group(const std::shared_ptr<ProcessGroup>& group = nullptr);

}  // namespace c10d
}  // namespace trainrun
