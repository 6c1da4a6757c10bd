#include "launcher/rendezvous.h"

#include <cstdlib>
#include <optional>
#include <thread>

#include "base/error.h"
#include "store/store_barrier.h"

namespace trainrun {
namespace {

constexpr std::chrono::milliseconds kPoll{10};

}  // namespace

ElasticRendezvous::ElasticRendezvous(std::shared_ptr<Store> store, RendezvousSettings settings)
    : store_(std::move(store)), settings_(std::move(settings)) {
  store_->compare_set(key("round"), {}, to_bytes("0"));  // the first agent starts round 0
}

int ElasticRendezvous::current_round() { return std::stoi(to_string(store_->get(key("round")))); }

bool ElasticRendezvous::wait_for_round_after(int round, Clock::time_point deadline,
                                             const std::function<bool()>& stop_requested) {
  while (current_round() <= round) {
    if (stop_requested && stop_requested()) return false;
    TR_CHECK(Clock::now() < deadline, TimeoutError,
             "rendezvous '{}': waited for round {} to be replaced by a new one until the join timeout ({} s)",
             settings_.run_id, round, settings_.join_timeout.count() / 1000);
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

std::optional<RendezvousRound> ElasticRendezvous::next_round(const std::function<bool()>& stop_requested) {
  const auto deadline = Clock::now() + settings_.join_timeout;
  for (;;) {
    const int round = current_round();
    if (store_->check({round_key(round, "closed")})) {
      // Too late for this one: say so (the running agents re-form), then join the next.
      store_->add(round_key(round, "waiting"), 1);
      if (!wait_for_round_after(round, deadline, stop_requested)) return std::nullopt;
      continue;
    }
    const int64_t order = store_->add(round_key(round, "joined"), 1);
    std::optional<Clock::time_point> last_call_ends;
    for (;;) {
      if (store_->check({round_key(round, "closed")})) {
        const int64_t members = std::stoll(to_string(store_->get(round_key(round, "closed"))));
        if (order <= members) return RendezvousRound{round, static_cast<int>(order - 1), static_cast<int>(members)};
        store_->add(round_key(round, "waiting"), 1);
        if (!wait_for_round_after(round, deadline, stop_requested)) return std::nullopt;
        break;
      }
      if (current_round() != round) break;  // replaced while forming: join the new one
      const int64_t joined = store_->add(round_key(round, "joined"), 0);
      if (joined >= settings_.min_nodes && !last_call_ends) last_call_ends = Clock::now() + settings_.last_call;
      const bool full = joined >= settings_.max_nodes;
      if (full || (last_call_ends && Clock::now() >= *last_call_ends)) {
        const int64_t members = std::min<int64_t>(joined, settings_.max_nodes);
        store_->compare_set(round_key(round, "closed"), {}, to_bytes(std::to_string(members)));
        continue;  // read back whichever count won
      }
      TR_CHECK(Clock::now() < deadline, TimeoutError,
               "rendezvous '{}' round {}: {} of at least {} nodes joined within the join timeout ({} s)",
               settings_.run_id, round, joined, settings_.min_nodes, settings_.join_timeout.count() / 1000);
      if (stop_requested && stop_requested()) return std::nullopt;
      std::this_thread::sleep_for(kPoll);
    }
  }
}

bool ElasticRendezvous::group_must_reform(int round) {
  return current_round() != round || store_->add(round_key(round, "waiting"), 0) > 0;
}

void ElasticRendezvous::request_new_round(int round) {
  store_->compare_set(key("round"), to_bytes(std::to_string(round)), to_bytes(std::to_string(round + 1)));
}

int64_t ElasticRendezvous::mark_done(int round, int nnodes) {
  return store_barrier_arrive(*store_, round_key(round, "end"), nnodes);
}

bool ElasticRendezvous::wait_all_done(int round, int nnodes, std::chrono::milliseconds patience) {
  try {
    store_barrier_wait(*store_, round_key(round, "end"), nnodes, patience);
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

// --rdzv-conf "join_timeout=600,last_call_timeout=1,is_host=1", as torchrun's:
// timeouts in seconds; is_host (1/0, true/false) says whether this node hosts
// the store whatever its host name (Kubernetes pods often cannot tell that
// the endpoint's service name is theirs); unset, the name decides.
RendezvousSettings parse_rdzv_conf(const std::string& conf, std::optional<bool>* is_host) {
  RendezvousSettings rs;
  size_t start = 0;
  while (start < conf.size()) {
    size_t comma = conf.find(',', start);
    std::string item = conf.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.find('=');
    TR_CHECK(eq != std::string::npos, ValueError, "--rdzv-conf: '{}' is not key=value", item);
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    char* end = nullptr;
    const double seconds = std::strtod(v.c_str(), &end);
    const bool number = end != v.c_str() && *end == '\0' && seconds >= 0;
    const auto ms = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
    if (k == "join_timeout" && number)
      rs.join_timeout = ms;
    else if (k == "last_call_timeout" && number)
      rs.last_call = ms;
    else if (k == "is_host" && (v == "1" || v == "true" || v == "True" || v == "0" || v == "false" || v == "False"))
      *is_host = v == "1" || v == "true" || v == "True";
    else if (k == "read_timeout" || k == "timeout") {
      // accepted for compatibility; the store's timeouts cover them
    } else {
      throw ValueError(
          fmt::format("--rdzv-conf: '{}' is not a known setting (join_timeout=SECONDS, last_call_timeout=SECONDS, "
                      "is_host=1|0)",
                      item));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return rs;
}

}  // namespace trainrun
