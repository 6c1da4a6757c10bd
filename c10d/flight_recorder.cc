#include "c10d/flight_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/log.h"

namespace trainrun {
namespace c10d {
namespace {

// The store key a failing rank bumps to ask the others for their dumps.
constexpr const char* kDumpRequestKey = "flight_recorder/dump_requests";

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

size_t capacity_from_env() {
  const char* v = std::getenv("TRAINRUN_FR_BUFFER_SIZE");
  if (v == nullptr || *v == '\0') return 2000;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  TR_CHECK(end != v && *end == '\0' && n >= 0, ValueError,
           "TRAINRUN_FR_BUFFER_SIZE must be a count of operations (0 turns the flight recorder off), got '{}'", v);
  return static_cast<size_t>(n);
}

std::string dump_dir() {
  const char* d = std::getenv("TRAINRUN_FR_DUMP_DIR");
  return d == nullptr ? "" : d;
}

const char* kind_name(FlightRecorder::Kind k) { return k == FlightRecorder::Kind::Collective ? "collective" : "p2p"; }

}  // namespace

FlightRecorder& FlightRecorder::global() {
  // Never destroyed: groups record from their threads until the process ends.
  static FlightRecorder* recorder = new FlightRecorder(capacity_from_env());
  return *recorder;
}

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity) {
  ring_.resize(capacity);
  calls_.resize(capacity);
}

FlightRecorder::~FlightRecorder() { stop_watching(); }

int FlightRecorder::register_group(const std::string& name, const std::string& backend,
                                   const std::vector<int>& global_ranks) {
  std::lock_guard<SpinLock> lock(mu_);
  groups_.push_back(Group{name, backend, global_ranks});
  return static_cast<int>(groups_.size()) - 1;
}

uint64_t FlightRecorder::record(int group, uint32_t seq, Kind kind, CollectiveCall call,
                                const std::shared_ptr<Work>& work) {
  if (capacity_ == 0) return 0;
  const int64_t created = now_ns();
  std::lock_guard<SpinLock> lock(mu_);
  const uint64_t id = next_id_++;
  Entry& e = ring_[(id - 1) % capacity_];
  e.id = id;
  e.group = group;
  e.seq = seq;
  e.kind = kind;
  calls_[(id - 1) % capacity_] = std::move(call);
  e.state = "scheduled";
  e.created_ns = created;
  e.started_ns = e.completed_ns = 0;
  e.error.clear();
  e.work = work;
  return id;
}

void FlightRecorder::completed(uint64_t id, int64_t started_ns, const std::string& error) {
  if (id == 0) return;
  const int64_t ended = now_ns();
  std::lock_guard<SpinLock> lock(mu_);
  Entry& e = ring_[(id - 1) % capacity_];
  if (e.id != id) return;  // overwritten by newer operations already
  // A backend that does not report starts: at the end. The wall clock may step back a little between two
  // readings (a VM's clock being corrected), so the three times are kept in order.
  e.started_ns = std::max(e.created_ns, started_ns != 0 ? started_ns : ended);
  e.completed_ns = std::max(e.started_ns, ended);
  e.state = error.empty() ? "completed" : "failed";
  e.error = error;
  e.work.reset();
}

std::vector<FlightRecorder::Entry> FlightRecorder::entries() const {
  // Copied under the lock, formatted after it: a dump never holds up the collectives being recorded.
  std::vector<Entry> out;
  std::vector<CollectiveCall> calls;
  {
    std::lock_guard<SpinLock> lock(mu_);
    const uint64_t first = next_id_ > capacity_ ? next_id_ - capacity_ : 1;
    for (uint64_t id = first; id < next_id_; ++id) {
      out.push_back(ring_[(id - 1) % capacity_]);
      calls.push_back(calls_[(id - 1) % capacity_]);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    Entry& e = out[i];
    e.op = calls[i].format();
    if (e.state == "scheduled") {
      if (auto w = e.work.lock(); w && w->started_ns() != 0) {
        e.started_ns = std::max(e.created_ns, w->started_ns());
        e.state = "started";
      }
    }
    e.work.reset();
  }
  return out;
}

std::vector<FlightRecorder::Group> FlightRecorder::groups() const {
  std::lock_guard<SpinLock> lock(mu_);
  return groups_;
}

void FlightRecorder::set_rank(int rank) {
  std::lock_guard<SpinLock> lock(mu_);
  rank_ = rank;
}

std::string FlightRecorder::dump_json(const std::string& reason) const {
  const std::vector<Group> group_list = this->groups();
  nlohmann::json groups = nlohmann::json::array();
  for (const Group& g : group_list)
    groups.push_back(nlohmann::json{{"name", g.name}, {"backend", g.backend}, {"ranks", g.ranks}});
  nlohmann::json entries = nlohmann::json::array();
  for (const Entry& e : this->entries()) {
    nlohmann::json j{
        {"id", e.id},
        {"group", e.group >= 0 && e.group < static_cast<int>(group_list.size()) ? group_list[e.group].name : ""},
        {"seq", e.seq},
        {"kind", kind_name(e.kind)},
        {"op", e.op},
        {"state", e.state},
        {"time_created_ns", e.created_ns},
        {"time_started_ns", e.started_ns},
        {"time_completed_ns", e.completed_ns}};
    if (!e.error.empty()) j["error"] = e.error;
    entries.push_back(std::move(j));
  }
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  int rank;
  {
    std::lock_guard<SpinLock> lock(mu_);
    rank = rank_;
  }
  nlohmann::json dump{{"version", 1},          {"rank", rank},     {"pid", static_cast<int64_t>(::getpid())},
                      {"host", host},          {"reason", reason}, {"time_ns", now_ns()},
                      {"capacity", capacity_}, {"groups", groups}, {"entries", entries}};
  // Invalid UTF-8 in an error message is replaced, never a reason to lose the dump.
  return dump.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string FlightRecorder::dump_to_dir(const std::string& reason) const {
  const std::string dir = dump_dir();
  if (dir.empty()) return "";
  int rank;
  {
    std::lock_guard<SpinLock> lock(mu_);
    rank = rank_;
  }
  const std::string path = fmt::format("{}/rank{}.json", dir, rank);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const std::string text = dump_json(reason);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != text.size() || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return "";
  }
  return path;
}

void FlightRecorder::watch(std::shared_ptr<Store> store, std::chrono::milliseconds interval) {
  stop_watching();
  if (!store || dump_dir().empty() || capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(watch_mu_);
  watch_store_ = std::move(store);
  watch_interval_ = interval;
  watch_stopping_ = false;
  // Requests made before this process joined were for an earlier attempt's workers.
  handled_requests_ = 0;
  try {
    if (watch_store_->check({kDumpRequestKey})) handled_requests_ = watch_store_->add(kDumpRequestKey, 0);
  } catch (const std::exception&) {
  }
  watcher_ = std::thread([this] { watch_loop(); });
}

void FlightRecorder::stop_watching() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  std::lock_guard<std::mutex> lock(watch_mu_);
  watch_store_.reset();
}

void FlightRecorder::watch_loop() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_stopping_) {
    watch_cv_.wait_for(lock, watch_interval_);
    if (watch_stopping_) break;
    std::shared_ptr<Store> store = watch_store_;
    lock.unlock();
    try {
      if (store->check({kDumpRequestKey})) {
        const int64_t requests = store->add(kDumpRequestKey, 0);
        if (requests > handled_requests_) {
          handled_requests_ = requests;
          dump_to_dir("another rank asked for every rank's flight record (a collective failed there)");
        }
      }
    } catch (const std::exception&) {
      // The store is gone (the job is ending): nothing to answer.
    }
    lock.lock();
  }
}

void FlightRecorder::dump_everywhere(const std::string& reason) {
  if (capacity_ == 0) return;
  const std::string path = dump_to_dir(reason);
  if (!path.empty()) log_line("", fmt::format("flight recorder: dumped this rank's last collectives to {}", path));
  std::shared_ptr<Store> store;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    store = watch_store_;
  }
  if (!store) return;
  try {
    // Our own watcher sees the new count too; it counts it as handled.
    handled_requests_ = store->add(kDumpRequestKey, 1);
  } catch (const std::exception&) {
  }
}

}  // namespace c10d
}  // namespace trainrun
