#include "launcher/agent_commands.h"

#include <fmt/format.h>
#include <glob.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "base/log.h"
#include "launcher/flight_analysis.h"
#include "proto/agent.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace trainrun {
namespace {

namespace v1 = trainrun::agent::v1;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

struct StatusCommandArgs {
  std::string address;
  bool json = false;
  double timeout = 5.0;
  std::string token;
  std::string tls_ca;          // verify an agent that serves TLS against this PEM (--tls-ca, TRAINRUN_AGENT_TLS_CA)
  double drain_timeout = 300;  // trainrun drain
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Plaintext, or TLS verified against --tls-ca.
std::shared_ptr<grpc::Channel> make_channel(const StatusCommandArgs& args) {
  std::string ca = args.tls_ca;
  if (ca.empty())
    if (const char* env = std::getenv("TRAINRUN_AGENT_TLS_CA"); env != nullptr) ca = env;
  if (ca.empty()) return grpc::CreateChannel(args.address, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = read_file(ca);
  if (options.pem_root_certs.empty()) throw std::runtime_error("--tls-ca: cannot read " + ca);
  return grpc::CreateChannel(args.address, grpc::SslCredentials(options));
}

std::chrono::system_clock::time_point deadline(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(seconds));
}

const char* phase_name(v1::GetStatusResponse::Phase p) {
  switch (p) {
    case v1::GetStatusResponse::RENDEZVOUS:
      return "in rendezvous";
    case v1::GetStatusResponse::RUNNING:
      return "running";
    case v1::GetStatusResponse::STOPPING:
      return "stopping its workers";
    case v1::GetStatusResponse::RESTARTING:
      return "restarting";
    case v1::GetStatusResponse::DONE:
      return "done";
    default:
      return "starting";
  }
}

std::string worker_line(const v1::WorkerStatus& w) {
  std::string state;
  switch (w.state()) {
    case v1::WorkerStatus::RUNNING:
      state = "running";
      break;
    case v1::WorkerStatus::SUCCEEDED:
      state = "succeeded";
      break;
    case v1::WorkerStatus::STOPPED:
      state = "stopped by the agent";
      break;
    case v1::WorkerStatus::FAILED:
      state = w.signal() != 0 ? fmt::format("failed (signal {})", w.signal())
                              : fmt::format("failed (exit code {})", w.exit_code());
      if (!w.root_cause().empty()) state += ": " + w.root_cause();
      break;
    default:
      state = "unknown";
  }
  return fmt::format("  rank {} (local {}) pid {}: {}", w.global_rank(), w.local_rank(), w.pid(), state);
}

int run_status(const StatusCommandArgs& args) {
  auto channel = make_channel(args);
  v1::GetStatusResponse status;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline(args.timeout));
    grpc::Status s = v1::Agent::NewStub(channel)->GetStatus(&ctx, v1::GetStatusRequest(), &status);
    if (!s.ok()) {
      log_line("", fmt::format("no agent answered at {} within {} s (gRPC status {}: {})", args.address, args.timeout,
                               static_cast<int>(s.error_code()), s.error_message()));
      return 1;
    }
  }
  HealthCheckResponse ready;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline(args.timeout));
    HealthCheckRequest request;
    request.set_service("trainrun.ready");
    grpc::health::v1::Health::NewStub(channel)->Check(&ctx, request, &ready);
  }
  if (args.json) {
    std::string json;
    google::protobuf::util::JsonPrintOptions options;
    options.always_print_primitive_fields = true;
    (void)google::protobuf::util::MessageToJsonString(status, &json, options);
    std::printf("%s\n", json.c_str());
    return 0;
  }
  std::printf("job %s on %s: node %d of %d, attempt %d of %d, %s%s\n", status.run_id().c_str(), status.host().c_str(),
              status.node_rank(), status.nnodes(), status.attempt() + 1, status.max_restarts() + 1,
              phase_name(status.phase()), ready.status() == HealthCheckResponse::SERVING ? " (ready)" : "");
  for (const v1::WorkerStatus& w : status.workers()) std::printf("%s\n", worker_line(w).c_str());
  return 0;
}

const char* event_name(v1::Event::Kind kind) {
  switch (kind) {
    case v1::Event::RENDEZVOUS:
      return "rendezvous";
    case v1::Event::WORKERS_STARTED:
      return "workers started";
    case v1::Event::WORKER_EXITED:
      return "worker exited";
    case v1::Event::WORKER_FAILED:
      return "worker failed";
    case v1::Event::WORKER_STOPPED:
      return "worker stopped";
    case v1::Event::SIGNAL:
      return "signal";
    case v1::Event::REFORM:
      return "re-form";
    case v1::Event::RESTART:
      return "restart";
    case v1::Event::JOB_DONE:
      return "job done";
    default:
      return "event";
  }
}

// Prints every event from the job's start until it ends (or the agent goes away).
int run_events(const StatusCommandArgs& args) {
  auto channel = make_channel(args);
  if (!channel->WaitForConnected(deadline(args.timeout))) {
    log_line("", fmt::format("no agent answered at {} within {} s", args.address, args.timeout));
    return 1;
  }
  grpc::ClientContext ctx;
  v1::WatchEventsRequest request;
  request.set_from_start(true);
  auto reader = v1::Agent::NewStub(channel)->WatchEvents(&ctx, request);
  v1::Event event;
  while (reader->Read(&event)) {
    if (args.json) {
      std::string json;
      (void)google::protobuf::util::MessageToJsonString(event, &json);
      std::printf("%s\n", json.c_str());
    } else {
      std::printf("%.3f  attempt %d  %-15s %s\n", event.time(), event.attempt(), event_name(event.kind()),
                  event.message().c_str());
    }
    std::fflush(stdout);
  }
  grpc::Status s = reader->Finish();
  if (!s.ok() && event.kind() != v1::Event::JOB_DONE) {
    log_line("", fmt::format("the agent at {} went away before the job ended (gRPC status {}: {})", args.address,
                             static_cast<int>(s.error_code()), s.error_message()));
    return 1;
  }
  return 0;
}

// The job's token: given, from TRAINRUN_AGENT_TOKEN, or from the token file
// of the agent on this host whose port file names the address's port.
std::string find_token(const StatusCommandArgs& args) {
  if (!args.token.empty()) return args.token;
  if (const char* t = std::getenv("TRAINRUN_AGENT_TOKEN"); t != nullptr && *t != '\0') return t;
  const std::string port = args.address.substr(args.address.rfind(':') + 1);
  glob_t found{};
  std::string token;
  if (glob("/tmp/trainrun-*/agent_port", 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc && token.empty(); ++i) {
      std::string path = found.gl_pathv[i], content;
      // /tmp/trainrun-RUN-PID: an agent killed before it could clean up leaves its files; skip dead ones.
      const std::string dir = path.substr(0, path.rfind('/'));
      const long pid = std::strtol(dir.substr(dir.rfind('-') + 1).c_str(), nullptr, 10);
      if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) continue;
      std::ifstream(path) >> content;
      if (content == port) std::ifstream(path.substr(0, path.rfind('/')) + "/agent_token") >> token;
    }
  }
  globfree(&found);
  return token;
}

// A control call (with the job's token); false after printing why it failed.
template <typename Request, typename Response, typename Call>
bool control_call(const StatusCommandArgs& args, const char* what, Call call, Response* response,
                  const Request& request = Request()) {
  auto channel = make_channel(args);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline(args.timeout));
  const std::string token = find_token(args);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  auto stub = v1::Agent::NewStub(channel);
  grpc::Status s = ((*stub).*call)(&ctx, request, response);
  if (s.ok()) return true;
  log_line("", fmt::format("{} {}: {} (gRPC status {}){}", what, args.address, s.error_message(),
                           static_cast<int>(s.error_code()),
                           token.empty() ? "; no token found (--token, TRAINRUN_AGENT_TOKEN, or run it on the "
                                           "agent's host)"
                                         : ""));
  return false;
}

int run_stop(const StatusCommandArgs& args) {
  v1::StopResponse response;
  if (!control_call<v1::StopRequest>(args, "stop", &v1::Agent::Stub::Stop, &response)) return 1;
  std::printf("asked the agent at %s to stop the job\n", args.address.c_str());
  return 0;
}

int run_stacks(const StatusCommandArgs& args) {
  v1::DumpStacksResponse response;
  if (!control_call<v1::DumpStacksRequest>(args, "stacks", &v1::Agent::Stub::DumpStacks, &response)) return 1;
  for (const v1::WorkerStacks& w : response.workers()) {
    std::printf("=== rank %d (pid %lld)%s\n", w.global_rank(), static_cast<long long>(w.pid()),
                w.error().empty() ? "" : (": " + w.error()).c_str());
    std::printf("%s\n", w.stacks().c_str());
  }
  return 0;
}

int run_drain(const StatusCommandArgs& args) {
  v1::DrainRequest request;
  request.set_timeout_seconds(args.drain_timeout);
  v1::DrainResponse response;
  if (!control_call(args, "drain", &v1::Agent::Stub::Drain, &response, request)) return 1;
  std::printf("asked the workers at %s to checkpoint and exit with 138 within %g s\n", args.address.c_str(),
              args.drain_timeout);
  return 0;
}

// The findings of the records in a directory of dumps (an agent's attempt_N/flight), or of a running job's.
int run_flight(const StatusCommandArgs& args) {
  struct stat st {};
  if (::stat(args.address.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::vector<std::string> problems;
    const std::map<int, std::string> dumps = read_flight_dumps(args.address, &problems);
    if (dumps.empty()) {
      log_line("", fmt::format("flight: no rank<R>.json dumps in {}", args.address));
      return 1;
    }
    for (const std::string& line : problems) std::printf("%s\n", line.c_str());
    for (const std::string& line : analyze_flight_records(dumps)) std::printf("%s\n", line.c_str());
    return 0;
  }
  v1::GetFlightRecordResponse response;
  if (!control_call<v1::GetFlightRecordRequest>(args, "flight", &v1::Agent::Stub::GetFlightRecord, &response)) return 1;
  if (args.json) {
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(response, &json);
    std::printf("%s\n", json.c_str());
    return 0;
  }
  for (const v1::WorkerFlightRecord& w : response.workers())
    if (!w.error().empty())
      std::printf("rank %d (pid %lld): %s\n", w.global_rank(), static_cast<long long>(w.pid()), w.error().c_str());
  for (const std::string& line : response.findings()) std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

// A client subcommand: HOST:PORT, --timeout, and what else `extra` adds; it runs `run` when parsed.
static void add_client_command(CLI::App& app, int& exit_code, const char* name, const char* help,
                               int (*run)(const StatusCommandArgs&),
                               const std::function<void(CLI::App*, StatusCommandArgs&)>& extra) {
  auto args = std::make_shared<StatusCommandArgs>();
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->add_option("address", args->address, "HOST:PORT of the agent service (trainrun --agent-port)")->required();
  cmd->add_option("--timeout", args->timeout, "Seconds to wait for the agent to answer")->check(CLI::PositiveNumber);
  cmd->add_option("--tls-ca", args->tls_ca,
                  "PEM certificate to verify an agent serving TLS (default: TRAINRUN_AGENT_TLS_CA; none: plaintext)");
  extra(cmd, *args);
  cmd->callback([args, run, &exit_code] {
    try {
      exit_code = run(*args);
    } catch (const std::exception& e) {
      log_line("", e.what());
      exit_code = 1;
    }
  });
}

static void add_token_option(CLI::App* cmd, StatusCommandArgs& args) {
  cmd->add_option("--token", args.token, "The job's token (default: TRAINRUN_AGENT_TOKEN or the agent's file)");
}

void add_drain_command(CLI::App& app, int& exit_code) {
  add_client_command(app, exit_code, "drain",
                     "Ask the workers to checkpoint and exit with 138 (retry elsewhere); the agent exits with 138",
                     &run_drain, [](CLI::App* cmd, StatusCommandArgs& args) {
                       add_token_option(cmd, args);
                       cmd->add_option("--drain-timeout", args.drain_timeout,
                                       "Seconds the workers have before they are stopped (default 300)")
                           ->check(CLI::PositiveNumber);
                     });
}

void add_flight_command(CLI::App& app, int& exit_code) {
  add_client_command(app, exit_code, "flight",
                     "What the workers' flight records say (which rank is behind, which calls differ); the "
                     "address may also be a directory of dumps",
                     &run_flight, [](CLI::App* cmd, StatusCommandArgs& args) {
                       add_token_option(cmd, args);
                       cmd->add_flag("--json", args.json, "Print every worker's record as JSON");
                     });
}

void add_stop_command(CLI::App& app, int& exit_code) {
  add_client_command(app, exit_code, "stop", "End a running job gracefully (SIGTERM, then SIGKILL after its grace)",
                     &run_stop, &add_token_option);
}

void add_stacks_command(CLI::App& app, int& exit_code) {
  add_client_command(app, exit_code, "stacks", "Print every running worker's Python stacks", &run_stacks,
                     &add_token_option);
}

void add_events_command(CLI::App& app, int& exit_code) {
  add_client_command(app, exit_code, "events", "Print a running job's events until it ends", &run_events,
                     [](CLI::App* cmd, StatusCommandArgs& args) {
                       cmd->add_flag("--json", args.json, "Print one JSON object per event");
                     });
}

void add_status_command(CLI::App& app, int& exit_code) {
  add_client_command(
      app, exit_code, "status", "Print a running job's status and readiness", &run_status,
      [](CLI::App* cmd, StatusCommandArgs& args) { cmd->add_flag("--json", args.json, "Print the status as JSON"); });
}

}  // namespace trainrun
