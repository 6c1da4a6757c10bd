#pragma once
// The agent as a service: gRPC's standard health protocol (grpc.health.v1,
// which Kubernetes' `grpc:` probes speak) and trainrun.agent.v1.Agent
// (GetStatus) on --agent-host:--agent-port. Health service "" is SERVING
// while the agent runs; "trainrun.ready" is SERVING while every local worker
// of the current attempt is up, NOT_SERVING otherwise. The status is a
// snapshot the agent's loop updates (AgentService::update), read by the
// service's threads.
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "proto/agent.pb.h"

namespace grpc {
class Server;
}

namespace trainrun {

using AgentStatus = trainrun::agent::v1::GetStatusResponse;

class AgentService {
 public:
  // Binds host:port (0: a free port) and starts serving; throws
  // DistBackendError naming the address when it cannot bind.
  AgentService(const std::string& host, int port);
  ~AgentService();  // stops serving (in-flight calls get a short grace)
  AgentService(const AgentService&) = delete;
  AgentService& operator=(const AgentService&) = delete;

  int port() const { return port_; }
  // Changes the status under the service's lock; readiness follows it.
  void update(const std::function<void(AgentStatus&)>& change);
  AgentStatus snapshot() const;

 private:
  class AgentImpl;
  mutable std::mutex mu_;
  AgentStatus status_;
  bool ready_ = false;
  std::unique_ptr<AgentImpl> agent_impl_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Whether `status` means "ready" for the trainrun.ready health service: the
// workers are running and every one is up.
bool agent_ready(const AgentStatus& status);

}  // namespace trainrun
