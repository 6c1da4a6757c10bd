#include "launcher/agent_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "launcher/flight_analysis.h"
#include "proto/agent.grpc.pb.h"

namespace trainrun {

namespace v1 = trainrun::agent::v1;

// The readiness service name the Kubernetes templates probe.
constexpr const char* kReadyService = "trainrun.ready";

namespace {

// Asks a worker's handler (python/trainrun/_stack_handler.py) for `request`
// ("stacks" or "flight"): one request line per connection, answered in full,
// then the handler closes.
std::string ask_worker(const std::string& socket_path, const std::string& request, std::chrono::milliseconds patience,
                       std::string* error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    *error = "the handler socket's path is too long";
    return "";
  }
  std::strcpy(addr.sun_path, socket_path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = fmt::format("no handler answers at {} (not a trainrun Python worker, or it has not started)", socket_path);
    if (fd >= 0) ::close(fd);
    return "";
  }
  const std::string line = request + "\n";
  if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    *error = fmt::format("the worker's handler at {} closed before the request", socket_path);
    ::close(fd);
    return "";
  }
  ::shutdown(fd, SHUT_WR);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + patience;
  char buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      *error = fmt::format("the worker's handler did not finish within {} ms", patience.count());
      break;
    }
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;  // the handler closes after the answer
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Plaintext, or TLS from a certificate chain and key in PEM files.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const AgentTls& tls) {
  TR_CHECK(tls.cert_file.empty() == tls.key_file.empty(), ValueError,
           "agent service: give both --agent-tls-cert and --agent-tls-key for TLS, or neither");
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = read_file(tls.cert_file);
  pair.private_key = read_file(tls.key_file);
  TR_CHECK(!pair.cert_chain.empty(), ValueError, "agent service: cannot read the TLS certificate {}", tls.cert_file);
  TR_CHECK(!pair.private_key.empty(), ValueError, "agent service: cannot read the TLS key {}", tls.key_file);
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back(pair);
  return grpc::SslServerCredentials(options);
}

}  // namespace

bool agent_ready(const AgentStatus& status) {
  if (status.phase() != v1::GetStatusResponse::RUNNING || status.workers_size() == 0) return false;
  for (const v1::WorkerStatus& w : status.workers())
    if (w.state() != v1::WorkerStatus::RUNNING) return false;
  return true;
}

class AgentService::AgentImpl final : public v1::Agent::Service {
 public:
  explicit AgentImpl(AgentService& owner) : owner_(owner) {}
  grpc::Status GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*, v1::GetStatusResponse* out) override {
    *out = owner_.snapshot();
    return grpc::Status::OK;
  }
  grpc::Status Stop(grpc::ServerContext* context, const v1::StopRequest*, v1::StopResponse*) override {
    grpc::Status denied = owner_.check_token(*context, "Stop");
    if (!denied.ok()) return denied;
    owner_.control_.stop();
    return grpc::Status::OK;
  }
  grpc::Status Drain(grpc::ServerContext* context, const v1::DrainRequest* request, v1::DrainResponse*) override {
    grpc::Status denied = owner_.check_token(*context, "Drain");
    if (!denied.ok()) return denied;
    const double timeout = request->timeout_seconds();
    if (!(timeout >= 0) || timeout > 7 * 24 * 3600.0)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          fmt::format("Drain: timeout_seconds must be in [0, 604800] (0: 300 s), got {}", timeout));
    if (owner_.snapshot().phase() != v1::GetStatusResponse::RUNNING)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "Drain: the workers are not running (the job is between attempts or ending)");
    owner_.control_.drain(timeout == 0 ? 300.0 : timeout);
    return grpc::Status::OK;
  }
  grpc::Status GetFlightRecord(grpc::ServerContext* context, const v1::GetFlightRecordRequest*,
                               v1::GetFlightRecordResponse* out) override {
    grpc::Status denied = owner_.check_token(*context, "GetFlightRecord");
    if (!denied.ok()) return denied;
    const AgentStatus status = owner_.snapshot();
    const std::string dump_dir = fmt::format("{}/attempt_{}/flight", owner_.control_.base_dir, status.attempt());
    std::map<int, std::string> records;
    std::vector<int> ranks;
    for (const v1::WorkerStatus& w : status.workers()) {
      v1::WorkerFlightRecord* wr = out->add_workers();
      wr->set_global_rank(w.global_rank());
      wr->set_pid(w.pid());
      ranks.push_back(w.global_rank());
      std::string error, record;
      if (w.state() == v1::WorkerStatus::RUNNING) {
        record = ask_worker(fmt::format("{}/rank{}.sock", owner_.control_.stacks_dir, w.global_rank()), "flight",
                            std::chrono::milliseconds(5000), &error);
      } else {
        record = read_file(fmt::format("{}/rank{}.json", dump_dir, w.global_rank()));
        if (record.empty()) error = "the worker has exited without dumping its flight record";
      }
      if (!record.empty()) {
        error.clear();
        records[w.global_rank()] = record;
      }
      wr->set_record_json(record);
      wr->set_error(error);
    }
    for (const std::string& line : analyze_flight_records(records, ranks)) out->add_findings(line);
    return grpc::Status::OK;
  }
  grpc::Status DumpStacks(grpc::ServerContext* context, const v1::DumpStacksRequest*,
                          v1::DumpStacksResponse* out) override {
    grpc::Status denied = owner_.check_token(*context, "DumpStacks");
    if (!denied.ok()) return denied;
    const AgentStatus status = owner_.snapshot();  // (a named copy: the loop must not outlive a temporary)
    for (const v1::WorkerStatus& w : status.workers()) {
      v1::WorkerStacks* ws = out->add_workers();
      ws->set_global_rank(w.global_rank());
      ws->set_pid(w.pid());
      if (w.state() != v1::WorkerStatus::RUNNING) {
        ws->set_error("the worker is not running");
        continue;
      }
      std::string error;
      ws->set_stacks(ask_worker(fmt::format("{}/rank{}.sock", owner_.control_.stacks_dir, w.global_rank()), "stacks",
                                std::chrono::milliseconds(5000), &error));
      ws->set_error(error);
    }
    return grpc::Status::OK;
  }
  grpc::Status WatchEvents(grpc::ServerContext* context, const v1::WatchEventsRequest* request,
                           grpc::ServerWriter<v1::Event>* writer) override {
    size_t start = 0;
    if (!request->from_start()) {
      std::lock_guard<std::mutex> lock(owner_.mu_);
      start = owner_.events_.size();
    }
    owner_.stream_events(
        start, [&](const v1::Event& e) { return writer->Write(e); }, [&] { return context->IsCancelled(); });
    return grpc::Status::OK;
  }

 private:
  AgentService& owner_;
};

AgentService::AgentService(const std::string& host, int port, std::string token, AgentControl control, AgentTls tls)
    : token_(std::move(token)), control_(std::move(control)), agent_impl_(std::make_unique<AgentImpl>(*this)) {
  // gRPC's own health service (Check and Watch), so probes and grpc_health_probe work unchanged.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const std::string address =
      host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
  builder.AddListeningPort(address, server_credentials(tls), &port_);
  builder.RegisterService(agent_impl_.get());
  server_ = builder.BuildAndStart();
  TR_CHECK(server_ != nullptr && port_ > 0, DistBackendError,
           "agent service: cannot listen on {} (is the port taken, or the address not this host's?)", address);
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(kReadyService, false);
}

AgentService::~AgentService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;  // every WatchEvents stream ends
  }
  events_changed_.notify_all();
  if (server_) {
    server_->GetHealthCheckService()->Shutdown();  // Watch streams end with NOT_SERVING
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_->Wait();
  }
}

void AgentService::update(const std::function<void(AgentStatus&)>& change) {
  // The readiness check changes under the same lock as the status, so a client that has read a status
  // (snapshot() takes the lock) never then reads the readiness of the status before it.
  std::lock_guard<std::mutex> lock(mu_);
  change(status_);
  const bool ready = agent_ready(status_);
  if (ready != ready_) server_->GetHealthCheckService()->SetServingStatus(kReadyService, ready);
  ready_ = ready;
}

AgentStatus AgentService::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

grpc::Status AgentService::check_token(const grpc::ServerContext& context, const char* call) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const std::string expected = "Bearer " + token_;
  bool same = it != metadata.end() && it->second.size() == expected.size();
  // Compared in full whatever the first difference, so timing tells nothing.
  unsigned char diff = 0;
  for (size_t i = 0; same && i < expected.size(); ++i)
    diff |= static_cast<unsigned char>(it->second.data()[i] ^ expected[i]);
  if (same && diff == 0) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      fmt::format("{} needs the job's token in the call's metadata (authorization: Bearer TOKEN); "
                                  "the agent wrote it next to its port file",
                                  call));
}

void AgentService::publish(AgentEvent event) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  event.set_time(std::chrono::duration<double>(now).count());
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  events_changed_.notify_all();
}

void AgentService::stream_events(size_t next, const std::function<bool(const AgentEvent&)>& send,
                                 const std::function<bool()>& cancelled) {
  for (;;) {
    AgentEvent event;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Wake now and then to notice a client that went away (gRPC cancels without notifying us).
      events_changed_.wait_for(lock, std::chrono::milliseconds(200),
                               [&] { return stopping_ || next < events_.size(); });
      if (next >= events_.size()) {
        if (stopping_) return;
        if (cancelled()) return;
        continue;
      }
      event = events_[next++];
    }
    if (!send(event) || event.kind() == AgentEvent::JOB_DONE) return;
  }
}

}  // namespace trainrun
