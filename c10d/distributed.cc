#include "c10d/distributed.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "base/error.h"
#include "c10d/device_backends_process_group.h"
#include "c10d/flight_recorder.h"
#include "c10d/process_group_wrapper.h"
#include "c10d/worker_handler.h"
#include "store/file_store.h"
#include "store/host_port.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"

namespace trainrun {
namespace c10d {
namespace {

struct State {
  std::mutex mu;
  std::shared_ptr<Store> store;
  std::shared_ptr<ProcessGroup> world;
  std::vector<std::shared_ptr<ProcessGroup>> subgroups;
  std::string backend;
  Milliseconds timeout{0};
  int next_group_id = 1;
};

State& state() {
  static State* s = new State();  // never destroyed: groups may outlive static destruction order
  return *s;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// Spaces around the number are allowed, as Python's int() (PyTorch's parser) allows them: PyTorch's own
// tutorials set MASTER_PORT = "12355 ".
int parse_int(const std::string& text, const char* what, const std::string& where) {
  try {
    size_t used = 0;
    int v = std::stoi(text, &used);  // (skips leading space)
    while (used < text.size() && std::isspace(static_cast<unsigned char>(text[used]))) ++used;
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw ValueError(fmt::format("init_process_group: {} '{}' (from {}) is not an integer", what, text, where));
}

// "?rank=1&world_size=4" at the end of a URL (and PyTorch's use_libuv=0/1): values for rank/world_size
// when not given; returns the URL without it.
std::string take_query(const std::string& url, int& rank, int& world_size) {
  size_t q = url.find('?');
  if (q == std::string::npos) return url;
  std::string query = url.substr(q + 1);
  size_t start = 0;
  while (start <= query.size()) {
    size_t amp = query.find('&', start);
    std::string kv = query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    size_t eq = kv.find('=');
    TR_CHECK(eq != std::string::npos, ValueError, "init_process_group: '{}' in '{}' is not key=value", kv, url);
    std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (key == "rank" && rank < 0)
      rank = parse_int(value, "rank", url);
    else if (key == "world_size" && world_size < 0)
      world_size = parse_int(value, "world_size", url);
    else if (key == "use_libuv")  // PyTorch's choice of TCPStore server: trainrun's one server serves both
      TR_CHECK(value == "0" || value == "1", ValueError, "init_process_group: use_libuv={} in '{}' is not 0 or 1",
               value, url);
    else if (key != "rank" && key != "world_size")
      throw ValueError(fmt::format("init_process_group: unknown parameter '{}' in '{}'", key, url));
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return url.substr(0, q);
}

std::shared_ptr<Store> store_from_init_method(const InitOptions& o, int& rank, int& world_size) {
  const std::string& url = o.init_method;
  if (url.rfind("env://", 0) == 0) {
    if (rank < 0) {
      std::string r = env_or_empty("RANK");
      TR_CHECK(!r.empty(), ValueError, "init_process_group(env://): RANK is not set (and no rank was given)");
      rank = parse_int(r, "RANK", "the environment");
    }
    if (world_size < 0) {
      std::string w = env_or_empty("WORLD_SIZE");
      TR_CHECK(!w.empty(), ValueError,
               "init_process_group(env://): WORLD_SIZE is not set (and no world_size was given)");
      world_size = parse_int(w, "WORLD_SIZE", "the environment");
    }
    std::string addr = env_or_empty("MASTER_ADDR"), port = env_or_empty("MASTER_PORT");
    TR_CHECK(!addr.empty(), ValueError, "init_process_group(env://): MASTER_ADDR is not set");
    TR_CHECK(!port.empty(), ValueError, "init_process_group(env://): MASTER_PORT is not set");
    int p = parse_int(port, "MASTER_PORT", "the environment");
    TR_CHECK(p > 0 && p <= 65535, ValueError, "init_process_group(env://): MASTER_PORT {} is not a port", p);
    TCPStoreOptions so;
    // Under a launcher that hosts the store itself (torchrun's convention),
    // rank 0 is a client like the others.
    so.is_master = rank == 0 && env_or_empty("TORCHELASTIC_USE_AGENT_STORE") != "True";
    so.num_workers = world_size;
    so.timeout = o.timeout;
    return std::make_shared<TCPStore>(addr, static_cast<uint16_t>(p), so);
  }
  if (url.rfind("tcp://", 0) == 0) {
    std::string rest = take_query(url.substr(6), rank, world_size);
    TR_CHECK(rank >= 0 && world_size > 0, ValueError,
             "init_process_group({}): give rank and world_size (arguments or ?rank=&world_size=)", url);
    HostPort hp = parse_host_port(rest);
    TR_CHECK(hp.port != 0, ValueError, "init_process_group({}): port 0 cannot be shared with other ranks", url);
    TCPStoreOptions so;
    so.is_master = rank == 0;
    so.num_workers = world_size;
    so.timeout = o.timeout;
    return std::make_shared<TCPStore>(hp.host, hp.port, so);
  }
  if (url.rfind("file://", 0) == 0) {
    std::string path = take_query(url.substr(7), rank, world_size);
    TR_CHECK(rank >= 0 && world_size > 0, ValueError,
             "init_process_group({}): give rank and world_size (arguments or ?rank=&world_size=)", url);
    TR_CHECK(!path.empty(), ValueError, "init_process_group({}): no file path", url);
    return std::make_shared<FileStore>(path, o.timeout);
  }
  throw ValueError(
      fmt::format("init_process_group: init_method '{}' is not one of env://, tcp://HOST:PORT, file:///PATH", url));
}

std::mutex& backends_mutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

std::map<std::string, BackendFactory>& backends() {
  static auto* registry = new std::map<std::string, BackendFactory>();
  return *registry;
}

BackendFactory factory_of(const std::string& backend) {
  {
    std::lock_guard<std::mutex> lock(backends_mutex());
    auto it = backends().find(backend);
    if (it != backends().end()) return it->second;
  }
  throw ValueError(fmt::format("init_process_group: backend '{}' is not available (this program has: {})", backend,
                               fmt::join(available_backends(), ", ")));
}

// One backend ("gloo"), or one per device ("cpu:gloo,cuda:nccl": device_backends_process_group.h).
std::shared_ptr<ProcessGroup> make_group(const std::string& backend, std::shared_ptr<Store> store, int rank, int size,
                                         const std::string& name, Milliseconds timeout) {
  std::shared_ptr<ProcessGroup> group;
  if (backend.find(':') == std::string::npos) {
    group = factory_of(backend)(store, rank, size, name, timeout);
  } else {
    auto device_backends = DeviceBackendsProcessGroup::parse(backend);
    for (const auto& [device, name_of_backend] : device_backends) factory_of(name_of_backend);  // (all known)
    group = std::make_shared<DeviceBackendsProcessGroup>(
        rank, size, name, timeout, backend, std::move(device_backends),
        [store, rank, size, name, timeout](const std::string& one_backend, const std::string& device) {
          return factory_of(one_backend)(std::make_shared<PrefixStore>(device, store), rank, size, name, timeout);
        });
  }
  // Every group gets the laggard report, and the signature check in debug mode.
  return std::make_shared<ProcessGroupWrapper>(std::move(group), std::move(store),
                                               ProcessGroupWrapper::detail_debug_from_env());
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  TR_CHECK(!name.empty() && factory, ValueError, "register_backend: give a name and a factory");
  std::lock_guard<std::mutex> lock(backends_mutex());
  TR_CHECK(backends().count(name) == 0, ValueError, "register_backend: backend '{}' is already registered", name);
  backends()[name] = std::move(factory);
}

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
  std::lock_guard<std::mutex> lock(backends_mutex());
  for (const auto& [name, factory] : backends()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

void init_process_group(const InitOptions& options) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  TR_CHECK(!s.world, ValueError, "init_process_group: the default group is already initialized (rank {} of {})",
           s.world ? s.world->rank() : -1, s.world ? s.world->size() : -1);
  TR_CHECK(options.timeout.count() > 0, ValueError, "init_process_group: timeout must be positive");
  int rank = options.rank, world_size = options.world_size;
  std::shared_ptr<Store> store = options.store;
  if (!store) {
    store = store_from_init_method(options, rank, world_size);
  } else {
    TR_CHECK(rank >= 0 && world_size > 0, ValueError, "init_process_group: with a store, give rank and world_size");
  }
  TR_CHECK(world_size > 0 && rank >= 0 && rank < world_size, ValueError,
           "init_process_group: rank {} is not in [0, world_size={})", rank, world_size);
  // Under a launcher's store, each restart of the workers gets its own key
  // space (as PyTorch's env:// does), so a new attempt never reads the last one's keys.
  if (!options.store && env_or_empty("TORCHELASTIC_USE_AGENT_STORE") == "True") {
    std::string attempt = env_or_empty("TORCHELASTIC_RESTART_COUNT");
    store = std::make_shared<PrefixStore>("/worker/attempt_" + (attempt.empty() ? "0" : attempt), store);
  }
  auto prefixed = std::make_shared<PrefixStore>("default_pg", store);
  s.world = make_group(options.backend, prefixed, rank, world_size, "default", options.timeout);
  s.store = store;
  // Dumps name this rank; under the launcher, other ranks' dump requests arrive through the job's store.
  FlightRecorder::global().set_rank(rank);
  FlightRecorder::global().watch(store);
  // Under `trainrun --agent-port`, a program without Python answers DumpStacks and GetFlightRecord too.
  start_worker_handler();
  s.backend = options.backend;
  s.timeout = options.timeout;
  s.next_group_id = 1;
}

bool is_initialized() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.world != nullptr;
}

std::shared_ptr<ProcessGroup> default_group() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  TR_CHECK(s.world, ValueError, "the default process group is not initialized: call init_process_group first");
  return s.world;
}

int get_rank() { return default_group()->rank(); }
int get_world_size() { return default_group()->size(); }

std::shared_ptr<Store> default_store() {
  default_group();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.store;
}

std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks_in, std::optional<Milliseconds> timeout) {
  std::shared_ptr<ProcessGroup> world = default_group();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<int> ranks = ranks_in;
  if (ranks.empty())
    for (int r = 0; r < world->size(); ++r) ranks.push_back(r);
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  TR_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), ValueError,
           "new_group: ranks [{}] repeat a rank", fmt::join(ranks, ", "));
  for (int r : ranks)
    TR_CHECK(r >= 0 && r < world->size(), ValueError, "new_group: rank {} is not in the default group of size {}", r,
             world->size());
  // Every rank counts groups the same way, so the id (and store prefix) agree.
  const int id = s.next_group_id++;
  auto it = std::find(ranks.begin(), ranks.end(), world->rank());
  if (it == ranks.end()) return nullptr;
  const int group_rank = static_cast<int>(it - ranks.begin());
  const std::string name = fmt::format("group_{}", id);
  auto prefixed = std::make_shared<PrefixStore>(name, s.store);
  auto group =
      make_group(s.backend, prefixed, group_rank, static_cast<int>(ranks.size()), name, timeout.value_or(s.timeout));
  group->set_global_ranks(ranks);
  s.subgroups.push_back(group);
  return group;
}

void destroy_process_group(const std::shared_ptr<ProcessGroup>& group) {
  State& s = state();
  std::vector<std::shared_ptr<ProcessGroup>> dropped;
  bool world_destroyed = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!group || group == s.world) {
      world_destroyed = true;
      dropped = std::move(s.subgroups);
      s.subgroups.clear();
      if (s.world) dropped.push_back(std::move(s.world));
      s.world.reset();
      s.store.reset();
    } else {
      auto it = std::find(s.subgroups.begin(), s.subgroups.end(), group);
      TR_CHECK(it != s.subgroups.end(), ValueError, "destroy_process_group: group '{}' is not a live group",
               group->name());
      dropped.push_back(*it);
      s.subgroups.erase(it);
    }
  }
  // Groups shut down (joining their threads) outside the lock.
  if (world_destroyed) FlightRecorder::global().watch(nullptr);
  dropped.clear();
}

}  // namespace c10d
}  // namespace trainrun
