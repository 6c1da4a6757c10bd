#pragma once
// The agent as a service: gRPC's standard health protocol (grpc.health.v1,
// which Kubernetes' `grpc:` probes speak) and trainrun.agent.v1.Agent
// (GetStatus, WatchEvents) on --agent-host:--agent-port. Health service "" is SERVING
// while the agent runs; "trainrun.ready" is SERVING while every local worker
// of the current attempt is up, NOT_SERVING otherwise. The status is a
// snapshot the agent's loop updates (AgentService::update), read by the
// service's threads.
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/agent.pb.h"

namespace grpc {
class Server;
class ServerContext;
class Status;
}

namespace trainrun {

using AgentStatus = trainrun::agent::v1::GetStatusResponse;
using AgentEvent = trainrun::agent::v1::Event;

// What the control calls act on.
struct AgentControl {
  std::function<void()> stop;                   // a Stop was accepted (runs on a gRPC thread)
  std::function<void(double timeout_s)> drain;  // a Drain was accepted (runs on a gRPC thread)
  std::string stacks_dir;  // workers' handlers listen at stacks_dir/rank<R>.sock (DumpStacks, GetFlightRecord)
  std::string base_dir;    // failed workers' flight dumps are in base_dir/attempt_<N>/flight
};

// TLS for the service: both paths set, or neither (plaintext).
struct AgentTls {
  std::string cert_file, key_file;
};

class AgentService {
 public:
  // Binds host:port (0: a free port) and starts serving; throws
  // DistBackendError naming the address when it cannot bind, ValueError
  // naming the file when TLS files cannot be read. Control calls (Stop,
  // Drain, DumpStacks, GetFlightRecord) must carry `token`.
  AgentService(const std::string& host, int port, std::string token, AgentControl control, AgentTls tls = {});
  ~AgentService();  // stops serving (in-flight calls get a short grace)
  AgentService(const AgentService&) = delete;
  AgentService& operator=(const AgentService&) = delete;

  int port() const { return port_; }
  // Changes the status under the service's lock; readiness follows it.
  // Called from the agent's thread.
  void update(const std::function<void(AgentStatus&)>& change);
  AgentStatus snapshot() const;
  // Records an event (its time is set here) and wakes the WatchEvents streams.
  void publish(AgentEvent event);

 private:
  class AgentImpl;
  // OK when the call carries the job's token, UNAUTHENTICATED naming `call` otherwise.
  grpc::Status check_token(const grpc::ServerContext& context, const char* call) const;
  // Streams event `next` onward to `send` until the job is done, the agent
  // stops or `cancelled()` says the client left.
  void stream_events(size_t next, const std::function<bool(const AgentEvent&)>& send,
                     const std::function<bool()>& cancelled);
  mutable std::mutex mu_;
  std::condition_variable events_changed_;
  AgentStatus status_;
  std::vector<AgentEvent> events_;
  bool stopping_ = false;
  bool ready_ = false;
  std::string token_;
  AgentControl control_;
  std::unique_ptr<AgentImpl> agent_impl_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// Whether `status` means "ready" for the trainrun.ready health service: the
// workers are running and every one is up.
bool agent_ready(const AgentStatus& status);

}  // namespace trainrun
