#pragma once
// Elastic rendezvous over the job's store (torchrun's c10d backend): agents
// join numbered rounds; a round closes when MAX nodes joined, or when at
// least MIN did and a last-call window passed without more. Node ranks
// follow the order of joining. An agent that arrives after its round closed
// waits for the next one and says so, which tells the running agents to
// re-form the group (scale-up); a failed agent asks for a new round, and the
// others re-form without it as long as MIN nodes remain.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "store/store.h"

namespace trainrun {

struct RendezvousSettings {
  std::string run_id;
  int min_nodes = 1, max_nodes = 1;
  std::chrono::milliseconds join_timeout{600000};  // torchrun's default: 600 s
  std::chrono::milliseconds last_call{1000};       // wait for more nodes once MIN have joined
};

// --rdzv-conf "join_timeout=600,last_call_timeout=1,is_host=1", as torchrun's: timeouts in seconds; is_host
// (1/0, true/false) says whether this node hosts the store whatever its host name; unset, the name decides.
// ValueError names an item that is not key=value or not a known setting.
RendezvousSettings parse_rdzv_conf(const std::string& conf, std::optional<bool>* is_host);

struct RendezvousRound {
  int round = 0;
  int node_rank = 0;  // this agent's place in the round (order of joining)
  int nnodes = 1;
};

class ElasticRendezvous {
 public:
  ElasticRendezvous(std::shared_ptr<Store> store, RendezvousSettings settings);

  // Joins the open round (or waits for the next when it has closed) and
  // returns once it closes with this agent in it. Throws TimeoutError naming
  // the run, the round and how many nodes came when MIN are not there within
  // the join timeout. stop_requested is asked at every poll: when it says
  // true (the agent got SIGTERM), the wait ends with nullopt, so a pod being
  // deleted leaves within its grace period instead of waiting up to the
  // join timeout.
  std::optional<RendezvousRound> next_round(const std::function<bool()>& stop_requested = {});
  // While the workers run: has another agent asked for a new round, or is
  // one waiting to join?
  bool group_must_reform(int round);
  // After a local failure: asks every agent to re-form.
  void request_new_round(int round);
  // This agent's workers finished (one arrival at the round's end barrier,
  // store/store_barrier.h); returns how many of the round's nnodes have.
  int64_t mark_done(int round, int nnodes);
  // Waits until the round's `nnodes` agents are done, or the patience runs out.
  bool wait_all_done(int round, int nnodes, std::chrono::milliseconds patience);

 private:
  std::string key(const std::string& k) const { return "rdzv/" + settings_.run_id + "/" + k; }
  std::string round_key(int round, const std::string& k) const { return key("r" + std::to_string(round) + "/" + k); }
  int current_round();
  // False when stop_requested said true before the round was replaced.
  bool wait_for_round_after(int round, std::chrono::steady_clock::time_point deadline,
                            const std::function<bool()>& stop_requested);

  std::shared_ptr<Store> store_;
  RendezvousSettings settings_;
};

}  // namespace trainrun
