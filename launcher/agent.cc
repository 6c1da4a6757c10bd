#include "launcher/agent.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <tuple>

#include "base/error.h"
#include "base/log.h"
#include "launcher/agent_metrics.h"
#include "launcher/agent_service.h"
#include "launcher/failure_report.h"
#include "launcher/flight_analysis.h"
#include "launcher/ipc_broker.h"
#include "launcher/job_directory.h"
#include "launcher/json_log.h"
#include "launcher/rendezvous.h"
#include "launcher/worker_group.h"
#include "store/host_port.h"
#include "store/store_barrier.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"

namespace trainrun {
namespace {

void say(const std::string& line) { log_line("", line); }

void make_dir(const std::string& path) { mkdir(path.c_str(), 0755); }

std::vector<std::string> command_line(const LaunchOptions& o) {
  std::vector<std::string> argv;
  if (!o.no_python) {
    const char* py = std::getenv("TRAINRUN_PYTHON");
    argv.push_back(py != nullptr && *py != '\0' ? py : "/usr/bin/python3");
    argv.push_back("-u");
    if (o.module) argv.push_back("-m");
  }
  argv.push_back(o.program);
  // (WorkerGroup puts each worker's local rank for the macro, as torchrun's ${local_rank})
  if (o.legacy_launch && !o.use_env) argv.push_back("--local-rank=" + std::string(kLocalRankMacro));
  argv.insert(argv.end(), o.program_args.begin(), o.program_args.end());
  return argv;
}

// Blocks the signals the agent handles and returns a signalfd that reads them.
int signal_fd() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  TR_CHECK(fd >= 0, DistBackendError, "cannot create a signalfd: {}", std::strerror(errno));
  return fd;
}

// The agent of one node: a state machine over the job's life.
//
//   rendezvous -> running -> (success) ----------------------------> done
//                    |-> (a worker failed, restarts left) -> restarting -> rendezvous
//                    |-> (the elastic group must re-form) ------------> rendezvous
//                    |-> (failed, no restarts left) -----------------> done
//                    '-> (SIGINT/SIGTERM/SIGHUP) -> exit 128 + signal
//
// Each state is a method; the agent service's status follows the states.
class Agent {
 public:
  explicit Agent(LaunchOptions options);
  // Stops the service, then removes the job's directory under /tmp but for
  // what a user may still read (flight dumps, --redirects logs).
  ~Agent();
  int run();

 private:
  enum class State { Rendezvous, Running, Restarting, Done };
  void host_or_join_store();
  void prepare_directories();
  void start_service();
  void report(const std::function<void(AgentStatus&)>& change) {
    if (service_) service_->update(change);
  }
  // An event for WatchEvents (global_rank -1: not about one worker).
  void publish(AgentEvent::Kind kind, const std::string& message, int global_rank = -1, int exit_code = 0,
               int signal = 0) {
    if (!service_) return;
    AgentEvent e;
    e.set_kind(kind);
    e.set_attempt(attempt_);
    e.set_rendezvous_round(round_);
    e.set_global_rank(global_rank);
    e.set_exit_code(exit_code);
    e.set_signal(signal);
    e.set_message(message);
    service_->publish(std::move(e));
  }
  State rendezvous();
  State run_workers();  // sets exit_status_ and, on a stop signal, stop_signal_
  bool stop_signal_received();  // in a rendezvous (no workers to forward to): sets stop_signal_
  State restart();
  int finish();  // done: waits for the other nodes as the store's host must, returns the exit status

  LaunchOptions o_;
  int signal_fd_;
  bool elastic_;
  std::string run_id_;
  std::unique_ptr<TCPStoreServer> server_;
  uint16_t port_;
  std::string master_addr_;
  std::unique_ptr<ElasticRendezvous> rdzv_;
  std::string base_dir_, log_dir_;
  std::map<std::string, std::string> common_env_;
  std::vector<std::string> argv_;
  std::shared_ptr<JsonLogState> json_log_;  // --log-format json (shared with the line formatter)
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<AgentMetrics> metrics_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<IpcBroker> ipc_broker_;  // the workers' shared device memory (TRAINRUN_IPC_BROKER)
  // Drain: set by the service's thread, read by the watch loop.
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> drain_deadline_ns_{0};  // steady clock
  std::string drain_file_;                     // exists once a Drain was accepted (TRAINRUN_DRAIN_FILE)
  void drain(double timeout_s);
  int attempt_ = 0, restarts_ = 0, node_rank_, nnodes_, round_ = 0;
  int exit_status_ = 0, stop_signal_ = 0;
};

Agent::Agent(LaunchOptions options) : o_(std::move(options)) {
  resolve(o_);
  signal_fd_ = signal_fd();
  if (o_.log_format == "json") {
    json_log_ = std::make_shared<JsonLogState>();
    json_log_->set(JsonLogContext{"", this_host(), 0});
    // The formatter keeps the state alive: threads that log after this agent is gone still find it.
    set_log_line_format([state = json_log_](std::string_view who, std::string_view line) {
      return json_agent_line(*state->get(), who, line);
    });
  }
  elastic_ = o_.rdzv_backend == "c10d";
  node_rank_ = o_.node_rank;
  nnodes_ = o_.max_nodes;
  run_id_ = o_.rdzv_id;
  // Every node must name the run alike: a random id only where there is one node.
  if (run_id_ == "none" && o_.max_nodes == 1 && !elastic_) {
    std::random_device rd;
    run_id_ = fmt::format("{:08x}", rd());
  }
  if (json_log_) json_log_->set(JsonLogContext{run_id_, this_host(), 0});
  host_or_join_store();
  prepare_directories();
  start_service();
  common_env_ = {
      {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc)},
      {"ROLE_NAME", o_.role},
      {"MASTER_ADDR", master_addr_},
      {"MASTER_PORT", std::to_string(port_)},
      {"TRAINRUN_MAX_RESTARTS", std::to_string(o_.max_restarts)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o_.max_restarts)},
      {"TRAINRUN_RUN_ID", run_id_},
      {"TORCHELASTIC_RUN_ID", run_id_},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
  };
  if (o_.nproc > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    common_env_["OMP_NUM_THREADS"] = "1";
    say(fmt::format("OMP_NUM_THREADS is not set: setting it to 1 for each of the {} workers (set it to tune)",
                    o_.nproc));
  }
  if (metrics_) common_env_["TRAINRUN_METRICS_DIR"] = base_dir_ + "/metrics";  // where put_metric writes
  if (service_) common_env_["TRAINRUN_STACKS_DIR"] = base_dir_ + "/stacks";    // where stack handlers listen
  try {
    ipc_broker_ = std::make_unique<IpcBroker>(base_dir_ + "/ipc.sock");
    common_env_["TRAINRUN_IPC_BROKER"] = ipc_broker_->socket_path();
  } catch (const std::exception& e) {  // workers can still share CPU tensors, which need no broker
    say(fmt::format("no broker for CUDA tensors shared between workers: {}", e.what()));
  }
  drain_file_ = base_dir_ + "/drain";
  common_env_["TRAINRUN_DRAIN_FILE"] = drain_file_;  // drain_requested() is true once it exists
  argv_ = command_line(o_);
}

void Agent::host_or_join_store() {
  port_ = static_cast<uint16_t>(o_.master_port);
  master_addr_ = o_.master_addr;
  if (elastic_) {
    // The agent on the endpoint's host serves the store (the first to bind
    // it, when several agents share the host); everyone joins as a client.
    std::optional<bool> is_host;
    RendezvousSettings rs = parse_rdzv_conf(o_.rdzv_conf, &is_host);
    rs.run_id = run_id_;
    rs.min_nodes = o_.min_nodes;
    rs.max_nodes = o_.max_nodes;
    HostPort hp = parse_host_port(o_.rdzv_endpoint.find(':') == std::string::npos ? o_.rdzv_endpoint + ":29400"
                                                                                  : o_.rdzv_endpoint);
    const bool loopback = hp.host == "localhost" || hp.host == "127.0.0.1" || hp.host == "::1";
    if (is_host.value_or(loopback || hp.host == this_host() || hp.host == o_.local_addr)) {
      TCPStoreServer::Options so;
      so.host = loopback ? (hp.host == "::1" ? "::1" : "127.0.0.1") : "0.0.0.0";
      so.port = hp.port;
      so.log = [](const std::string& line) { say("store: " + line); };
      try {
        server_ = std::make_unique<TCPStoreServer>(so);
        if (hp.port == 0) hp.port = server_->port();  // port 0, as torchrun takes it: a free one
        say(fmt::format("hosting the rendezvous store on {}:{}", so.host, hp.port));
      } catch (const DistBackendError&) {
        // Another agent on this host serves it.
      }
    }
    if (hp.port == 0)
      throw ValueError("--rdzv-endpoint " + o_.rdzv_endpoint +
                       ": port 0 (a free port) only works on the host that serves the store");
    master_addr_ = hp.host == "localhost" ? "127.0.0.1" : hp.host;
    port_ = hp.port;
    TCPStoreOptions co;
    co.timeout = rs.join_timeout;
    rdzv_ = std::make_unique<ElasticRendezvous>(std::make_shared<TCPStore>(master_addr_, port_, co), rs);
  } else if (o_.node_rank == 0) {
    // Node 0 hosts the store. On one node it listens on loopback and, unless
    // told a port, on a free one the kernel picks: two jobs never collide.
    TCPStoreServer::Options so;
    so.host = o_.max_nodes == 1 ? "127.0.0.1" : "0.0.0.0";
    if (o_.max_nodes == 1) master_addr_ = "127.0.0.1";
    so.port = port_;
    so.log = [](const std::string& line) { say("store: " + line); };
    server_ = std::make_unique<TCPStoreServer>(so);
    port_ = server_->port();
  }
}

void Agent::prepare_directories() {
  // Error files (and log files, when asked) live under per-attempt directories.
  base_dir_ = fmt::format("/tmp/trainrun-{}-{}", run_id_, getpid());
  make_dir(base_dir_);
  log_dir_ = o_.log_dir;
  bool files_wanted = false;
  for (int r = 0; r < o_.nproc; ++r)
    files_wanted = files_wanted || stream_mask_for(o_.redirects, r, "--redirects") != 0 ||
                   stream_mask_for(o_.tee, r, "--tee") != 0;
  if (log_dir_.empty() && files_wanted) {
    log_dir_ = base_dir_ + "/logs";
    say("--redirects/--tee without --log-dir: writing logs under " + log_dir_);
  }
}

void Agent::start_service() {
  if (o_.metrics_port >= 0) {
    make_dir(base_dir_ + "/metrics");
    metrics_ = std::make_unique<AgentMetrics>(base_dir_ + "/metrics");
    metrics_server_ = std::make_unique<MetricsServer>(o_.agent_host, o_.metrics_port, *metrics_);
    say(fmt::format("metrics on http://{}:{}/metrics", o_.agent_host, metrics_server_->port()));
  }
  // The agent service (health and status), when asked: its port goes to the
  // console and next to the error files, where a client on this host finds it.
  if (o_.agent_port < 0) return;
  // Control calls (Stop) need the job's token: TRAINRUN_AGENT_TOKEN, or a random one, written (mode 0600) next
  // to the port file, where `trainrun stop` on this host finds it.
  std::string token;
  if (const char* t = std::getenv("TRAINRUN_AGENT_TOKEN"); t != nullptr && *t != '\0') {
    token = t;
  } else {
    std::random_device rd;
    for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", rd());
  }
  const int fd = ::open((base_dir_ + "/agent_token").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    const std::string line = token + "\n";
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
  // A Stop call ends the job as SIGTERM does: the signal goes through the agent's own signal handling.
  // Workers' stack handlers listen in stacks/ (the trainrun package starts one when TRAINRUN_STACKS_DIR is set).
  make_dir(base_dir_ + "/stacks");
  AgentControl control;
  control.stop = [this] {
    publish(AgentEvent::SIGNAL, "a client called Stop: ending the job as SIGTERM would");
    ::kill(::getpid(), SIGTERM);
  };
  control.drain = [this](double timeout_s) { drain(timeout_s); };
  control.stacks_dir = base_dir_ + "/stacks";
  control.base_dir = base_dir_;
  service_ = std::make_unique<AgentService>(o_.agent_host, o_.agent_port, token, std::move(control),
                                            AgentTls{o_.agent_tls_cert, o_.agent_tls_key});
  say(fmt::format("agent service on {}:{}{}", o_.agent_host, service_->port(),
                  o_.agent_tls_cert.empty() ? "" : " (TLS)"));
  std::ofstream(base_dir_ + "/agent_port") << service_->port() << "\n";
  report([&](AgentStatus& s) {
    s.set_run_id(run_id_);
    s.set_host(this_host());
    s.set_node_rank(o_.node_rank);
    s.set_nnodes(o_.max_nodes);
    s.set_max_restarts(o_.max_restarts);
    s.set_phase(AgentStatus::RENDEZVOUS);
  });
}

int Agent::run() {
  State state = State::Rendezvous;
  for (;;) {
    switch (state) {
      case State::Rendezvous:
        state = rendezvous();
        break;
      case State::Running:
        state = run_workers();
        break;
      case State::Restarting:
        state = restart();
        break;
      case State::Done:
        return finish();
    }
    if (stop_signal_) return 128 + stop_signal_;  // a stop signal in the rendezvous or while workers ran
  }
}

bool Agent::stop_signal_received() {
  signalfd_siginfo info{};
  while (::read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    const int sig = static_cast<int>(info.ssi_signo);
    if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP) && !stop_signal_) {
      stop_signal_ = sig;
      const std::string line = fmt::format("received {} during the rendezvous: leaving it", signal_name(sig));
      say(line);
      publish(AgentEvent::SIGNAL, line, -1, 0, sig);
      publish(AgentEvent::JOB_DONE, fmt::format("stopped by {}", signal_name(sig)), -1, 128 + sig);
    }
  }
  return stop_signal_ != 0;
}

Agent::State Agent::rendezvous() {
  report([&](AgentStatus& s) {
    s.set_attempt(attempt_);
    s.clear_workers();
    if (rdzv_) s.set_phase(AgentStatus::RENDEZVOUS);
  });
  const auto rendezvous_start = std::chrono::steady_clock::now();
  if (rdzv_) {
    std::optional<RendezvousRound> joined = rdzv_->next_round([&] { return stop_signal_received(); });
    if (!joined) return State::Done;  // stop_signal_ is set: run() exits with 128 + it
    std::tie(round_, node_rank_, nnodes_) = std::tie(joined->round, joined->node_rank, joined->nnodes);
    say(fmt::format("rendezvous '{}' round {}: this is node {} of {}", run_id_, round_, node_rank_, nnodes_));
  }
  publish(AgentEvent::RENDEZVOUS,
          fmt::format("rendezvous '{}' round {}: this is node {} of {}", run_id_, round_, node_rank_, nnodes_));
  if (metrics_)
    metrics_->rendezvous_took(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - rendezvous_start).count());
  return State::Running;
}

Agent::State Agent::run_workers() {
  WorkerGroupSpec spec;
  spec.argv = argv_;
  spec.env = common_env_;
  const int world = nnodes_ * o_.nproc;
  spec.env["WORLD_SIZE"] = spec.env["ROLE_WORLD_SIZE"] = std::to_string(world);
  spec.env["GROUP_RANK"] = std::to_string(node_rank_);
  spec.env["GROUP_WORLD_SIZE"] = std::to_string(nnodes_);
  spec.nproc = o_.nproc;
  spec.node_rank = node_rank_;
  // Workers' key spaces in the store follow the round on elastic jobs (the
  // same on every node), the local restart count on static ones.
  spec.restart_count = rdzv_ ? round_ : restarts_;
  spec.attempt = attempt_;
  spec.attempt_dir = fmt::format("{}/attempt_{}", base_dir_, attempt_);
  // Workers dump their flight records here when a collective fails (c10d/flight_recorder.h).
  const std::string flight_dir = spec.attempt_dir + "/flight";
  make_dir(spec.attempt_dir);
  make_dir(flight_dir);
  spec.env["TRAINRUN_FR_DUMP_DIR"] = flight_dir;
  spec.log_dir = log_dir_;
  spec.run_id = run_id_;
  spec.redirects = o_.redirects;
  spec.tee = o_.tee;
  spec.shown_local_ranks = o_.shown_local_ranks;
  std::shared_ptr<const JsonLogContext> json_context;
  if (json_log_) {
    json_log_->set(JsonLogContext{run_id_, this_host(), attempt_});
    json_context = json_log_->get();
  }
  spec.json_log = json_context.get();
  std::unique_ptr<WorkerGroup> group;
  try {
    group = std::make_unique<WorkerGroup>(spec);
  } catch (const DistBackendError& e) {
    say(e.what());
    exit_status_ = 127;
    return State::Done;
  }
  report([&](AgentStatus& s) {
    s.set_rendezvous_round(round_);
    s.set_node_rank(node_rank_);
    s.set_nnodes(nnodes_);
    for (const Worker& w : group->workers()) {
      agent::v1::WorkerStatus* ws = s.add_workers();
      ws->set_global_rank(w.rank);
      ws->set_local_rank(w.local_rank);
      ws->set_pid(w.process->pid());
      ws->set_state(agent::v1::WorkerStatus::RUNNING);
      ws->set_restarts(restarts_);
    }
    s.set_phase(AgentStatus::RUNNING);
  });
  publish(AgentEvent::WORKERS_STARTED, fmt::format("{} workers started (attempt {})", o_.nproc, attempt_));
  if (metrics_) metrics_->workers_started(o_.nproc);

  WatchHooks hooks;
  hooks.monitor_interval = o_.monitor_interval;
  hooks.grace_period = o_.grace_period;
  if (rdzv_) {
    hooks.must_reform = [&] {
      if (!rdzv_->group_must_reform(round_)) return false;
      say(fmt::format("rendezvous '{}': a node joined or left: stopping the workers to re-form", run_id_));
      publish(AgentEvent::REFORM, "a node joined or left: stopping the workers to re-form");
      return true;
    };
  }
  hooks.on_stopping = [&] { report([](AgentStatus& s) { s.set_phase(AgentStatus::STOPPING); }); };
  hooks.before_stopping_on_failure = [&] {
    std::vector<int> running;
    for (const Worker& w : group->workers())
      if (!w.reaped) running.push_back(w.rank);
    // The other ranks' watchers poll the store every 200 ms: a few polls.
    wait_for_flight_dumps(flight_dir, running, std::chrono::seconds(3));
  };
  hooks.drain_deadline = [&]() -> std::optional<std::chrono::steady_clock::time_point> {
    if (!draining_.load()) return std::nullopt;
    return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(drain_deadline_ns_.load()));
  };
  hooks.on_stop_signal = [&](int sig) {
    publish(AgentEvent::SIGNAL, fmt::format("received {}: stopping the workers", signal_name(sig)), -1, 0, sig);
  };
  hooks.on_exit = [&](const Worker& w, bool failed_on_its_own, const std::string& cause) {
    report([&](AgentStatus& s) {
      for (agent::v1::WorkerStatus& ws : *s.mutable_workers()) {
        if (ws.local_rank() != w.local_rank) continue;
        const bool succeeded = w.process->exit_code() == 0;
        ws.set_state(succeeded           ? agent::v1::WorkerStatus::SUCCEEDED
                     : failed_on_its_own ? agent::v1::WorkerStatus::FAILED
                                         : agent::v1::WorkerStatus::STOPPED);
        ws.set_exit_code(w.process->term_signal() ? 0 : w.process->exit_code());
        ws.set_signal(w.process->term_signal());
        ws.set_root_cause(cause);
      }
    });
    const int code = w.process->term_signal() ? 0 : w.process->exit_code(), sig = w.process->term_signal();
    if (metrics_)
      metrics_->worker_exited(code == 0 && sig == 0 ? AgentMetrics::Exit::Success
                              : failed_on_its_own   ? AgentMetrics::Exit::Failure
                                                    : AgentMetrics::Exit::Stopped);
    if (code == 0 && sig == 0) {
      publish(AgentEvent::WORKER_EXITED, fmt::format("rank {} exited", w.rank), w.rank);
    } else if (draining_.load() && code == kDrainExitCode && sig == 0) {
      publish(AgentEvent::WORKER_EXITED, fmt::format("rank {} drained (exit code {})", w.rank, code), w.rank, code);
    } else if (failed_on_its_own) {
      publish(
          AgentEvent::WORKER_FAILED,
          fmt::format("rank {} failed with {}{}", w.rank, sig ? signal_name(sig) : fmt::format("exit code {}", code),
                      cause.empty() ? "" : ": " + cause),
          w.rank, code, sig);
    } else {
      publish(AgentEvent::WORKER_STOPPED, fmt::format("rank {} stopped by trainrun", w.rank), w.rank, code, sig);
    }
  };
  GroupOutcome outcome = group->watch(signal_fd_, hooks);
  ++attempt_;

  if (outcome.terminate_signal) {
    stop_signal_ = outcome.terminate_signal;
    publish(AgentEvent::JOB_DONE, fmt::format("stopped by {}", signal_name(stop_signal_)), -1, 128 + stop_signal_);
    return State::Done;
  }
  if (draining_.load()) {
    // Drained: the job asks to be retried elsewhere; no local restart.
    if (!outcome.failures.empty()) print_failure_summary(outcome.failures, group->stopped_ranks(), restarts_, 0);
    const int code = outcome.failures.empty() ? kDrainExitCode : root_cause(outcome.failures).exit_code;
    exit_status_ = code == 0 ? kDrainExitCode : code;
    say(fmt::format("drained: the workers have exited; exiting with {}", exit_status_));
    return State::Done;
  }
  if (outcome.failures.empty() && !outcome.reform) {
    exit_status_ = 0;
    return State::Done;
  }
  if (outcome.failures.empty()) {  // membership changed: re-form, not a failure
    rdzv_->request_new_round(round_);
    return State::Rendezvous;
  }
  print_failure_summary(outcome.failures, group->stopped_ranks(), restarts_, o_.max_restarts);
  std::vector<int> local_ranks;
  for (const Worker& w : group->workers()) local_ranks.push_back(w.rank);
  for (const std::string& line : flight_report(flight_dir, local_ranks)) say(line);
  const Failure& f = root_cause(outcome.failures);
  exit_status_ = f.signal != 0 ? 128 + f.signal : f.exit_code;
  if (rdzv_) rdzv_->request_new_round(round_);  // the others re-form (without us if we stop here)
  return restarts_ >= o_.max_restarts ? State::Done : State::Restarting;
}

void Agent::drain(double timeout_s) {
  if (draining_.exchange(true)) return;  // the first Drain's deadline holds
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(timeout_s));
  drain_deadline_ns_.store(deadline.time_since_epoch().count());
  std::ofstream(drain_file_) << timeout_s << "\n";
  const std::string line =
      fmt::format("a client called Drain: asking the workers to checkpoint and exit with {} within {:g} s",
                  kDrainExitCode, timeout_s);
  say(line);
  publish(AgentEvent::DRAIN, line);
}

Agent::~Agent() {
  service_.reset();  // no client reads the port or token files after this
  metrics_server_.reset();
  remove_job_directory(base_dir_);
}

Agent::State Agent::restart() {
  report([](AgentStatus& s) { s.set_phase(AgentStatus::RESTARTING); });
  ++restarts_;
  if (metrics_) metrics_->restarted();
  say(fmt::format("restarting the worker group ({} of {} restarts)", restarts_, o_.max_restarts));
  publish(AgentEvent::RESTART,
          fmt::format("restarting the worker group ({} of {} restarts)", restarts_, o_.max_restarts));
  return State::Rendezvous;
}

int Agent::finish() {
  report([](AgentStatus& s) { s.set_phase(AgentStatus::DONE); });
  publish(AgentEvent::JOB_DONE, exit_status_ == 0 ? "the job succeeded" : "the job failed", -1, exit_status_);
  if (exit_status_ == 127) return 127;  // the program could not be started: nothing to wait for
  const std::string leaks = ipc_broker_ ? ipc_broker_->leak_report() : "";
  if (!leaks.empty()) say("shared device memory the workers left behind:\n" + leaks.substr(0, leaks.size() - 1));
  // Every node reports the end of the job at one store barrier
  // (store/store_barrier.h); the node that hosts the store waits for all of
  // them before closing it (not long when the job failed: the others may be
  // gone). Elastic rounds count only the nodes that succeeded.
  const auto patience = exit_status_ == 0 ? std::chrono::seconds(60) : std::chrono::seconds(5);
  if (rdzv_) {
    try {
      if (exit_status_ == 0) rdzv_->mark_done(round_, nnodes_);
      if (server_ && !rdzv_->wait_all_done(round_, nnodes_, patience))
        say("not every node of the last round reported back before the store closed");
    } catch (const std::exception& e) {
      say(fmt::format("the rendezvous store is gone: {}", e.what()));
    }
    return exit_status_;
  }
  if (o_.max_nodes == 1) return exit_status_;  // nobody else uses the store
  try {
    TCPStoreOptions co;
    co.timeout = server_ ? Milliseconds(patience) : Milliseconds(std::chrono::seconds(5));
    TCPStore store(server_ ? "127.0.0.1" : master_addr_, port_, co);
    const std::string key = fmt::format("trainrun/{}/end", run_id_);
    store_barrier_arrive(store, key, o_.max_nodes);
    if (server_) store_barrier_wait(store, key, o_.max_nodes, patience);
  } catch (const std::exception& e) {
    say(fmt::format("the other nodes did not all report back: {}", e.what()));
  }
  return exit_status_;
}

}  // namespace

int run_agent(LaunchOptions o) { return Agent(std::move(o)).run(); }

}  // namespace trainrun
