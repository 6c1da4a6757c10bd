#include "launcher/agent.h"

#include <fstream>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "launcher/agent_service.h"
#include "launcher/error_file.h"
#include "launcher/log_router.h"
#include "launcher/rendezvous.h"
#include "launcher/worker_process.h"
#include "store/host_port.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"

extern char** environ;

namespace trainrun {
namespace {

void say(const std::string& line) { log_line("", line); }

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("SIG{} ({})", abbrev, sig) : fmt::format("signal {}", sig);
}

std::string hostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string iso_time(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void make_dirs(const std::string& path) {
  std::string partial;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    partial = path.substr(0, slash == std::string::npos ? path.size() : slash);
    if (!partial.empty()) mkdir(partial.c_str(), 0755);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
}

std::vector<std::string> command_line(const LaunchOptions& o) {
  std::vector<std::string> argv;
  if (!o.no_python) {
    const char* py = std::getenv("TRAINRUN_PYTHON");
    argv.push_back(py != nullptr && *py != '\0' ? py : "/usr/bin/python3");
    argv.push_back("-u");
    if (o.module) argv.push_back("-m");
  }
  argv.push_back(o.program);
  argv.insert(argv.end(), o.program_args.begin(), o.program_args.end());
  return argv;
}

// The environment with `overrides` replacing (or adding) their names.
std::vector<std::string> environment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    if (!overrides.count(name)) env.push_back(entry);
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

struct Worker {
  int local_rank, rank;
  std::unique_ptr<WorkerProcess> process;
  std::string error_file;
  bool stopped_by_us = false;  // trainrun signalled it to stop
  bool reaped = false;
};

struct Failure {
  int local_rank, rank;
  pid_t pid;
  int exit_code, signal;
  std::chrono::system_clock::time_point when;
  std::optional<WorkerError> error;
};

// The earliest failure: by the error file's timestamp when workers wrote
// one (that is when the error happened), else by exit time.
const Failure* root_cause(const std::vector<Failure>& failures) {
  const Failure* best = nullptr;
  auto key = [](const Failure& f) {
    return f.error && f.error->timestamp > 0 ? f.error->timestamp
                                             : std::chrono::duration<double>(f.when.time_since_epoch()).count();
  };
  for (const Failure& f : failures)
    if (best == nullptr || key(f) < key(*best)) best = &f;
  return best;
}

void print_summary(const std::vector<Failure>& failures, const std::vector<Worker>& workers, int attempt,
                   int max_restarts) {
  const Failure* f = root_cause(failures);
  std::string text = fmt::format("worker group failed (attempt {} of {})\n", attempt + 1, max_restarts + 1);
  text += "  root cause (first failure):\n";
  text += fmt::format("    rank:      {} (local rank {}) on {}, pid {}\n", f->rank, f->local_rank, hostname(), f->pid);
  text += f->signal != 0 ? fmt::format("    signal:    {}\n", signal_name(f->signal))
                         : fmt::format("    exit code: {}\n", f->exit_code);
  text += fmt::format("    time:      {}\n", iso_time(f->when));
  if (f->error) {
    text += fmt::format("    message:   {}\n", f->error->message);
    if (!f->error->traceback.empty()) {
      text += "    traceback:\n";
      size_t start = 0;
      const std::string& tb = f->error->traceback;
      while (start < tb.size()) {
        size_t nl = tb.find('\n', start);
        text += "      " + tb.substr(start, nl == std::string::npos ? std::string::npos : nl - start) + "\n";
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
    }
  } else {
    text += "    message:   (no error file; see the worker's output above)\n";
  }
  std::vector<std::string> others;
  for (const Failure& g : failures)
    if (&g != f)
      others.push_back(fmt::format("rank {} ({})", g.rank,
                                   g.signal != 0 ? signal_name(g.signal) : fmt::format("exit code {}", g.exit_code)));
  for (const Worker& w : workers)
    if (w.stopped_by_us) others.push_back(fmt::format("rank {} (stopped by trainrun)", w.rank));
  if (!others.empty()) text += fmt::format("  other workers: {}", fmt::join(others, ", "));
  say(text);
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

// --rdzv-conf "join_timeout=600,last_call_timeout=1" (seconds), as torchrun's.
RendezvousSettings parse_rdzv_conf(const std::string& conf) {
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
    else if (k == "read_timeout" || k == "is_host" || k == "timeout") {
      // accepted for compatibility; the store's timeouts cover them
    } else {
      throw ValueError(
          fmt::format("--rdzv-conf: '{}' is not a known setting with a number of seconds "
                      "(join_timeout, last_call_timeout)",
                      item));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return rs;
}

// Outcome of one attempt.
struct AttemptResult {
  bool success = false;
  int terminate_signal = 0;  // a stop signal the agent received
};

}  // namespace

int run_agent(LaunchOptions o) {
  resolve(o);
  const int sfd = signal_fd();
  const bool elastic = o.rdzv_backend == "c10d";
  std::string run_id = o.rdzv_id;
  // Every node must name the run alike: a random id only where there is one node.
  if (run_id == "none" && o.max_nodes == 1 && !elastic) {
    std::random_device rd;
    run_id = fmt::format("{:08x}", rd());
  }

  std::unique_ptr<TCPStoreServer> server;
  uint16_t port = static_cast<uint16_t>(o.master_port);
  std::string master_addr = o.master_addr;
  std::unique_ptr<ElasticRendezvous> rdzv;
  if (elastic) {
    // The agent on the endpoint's host serves the store (the first to bind
    // it, when several agents share the host); everyone joins as a client.
    RendezvousSettings rs = parse_rdzv_conf(o.rdzv_conf);
    rs.run_id = run_id;
    rs.min_nodes = o.min_nodes;
    rs.max_nodes = o.max_nodes;
    HostPort hp =
        parse_host_port(o.rdzv_endpoint.find(':') == std::string::npos ? o.rdzv_endpoint + ":29400" : o.rdzv_endpoint);
    const bool loopback = hp.host == "localhost" || hp.host == "127.0.0.1" || hp.host == "::1";
    if (loopback || hp.host == hostname() || hp.host == o.local_addr) {
      TCPStoreServer::Options so;
      so.host = loopback ? (hp.host == "::1" ? "::1" : "127.0.0.1") : "0.0.0.0";
      so.port = hp.port;
      so.log = [](const std::string& line) { say("store: " + line); };
      try {
        server = std::make_unique<TCPStoreServer>(so);
        say(fmt::format("hosting the rendezvous store on {}:{}", so.host, hp.port));
      } catch (const DistBackendError&) {
        // Another agent on this host serves it.
      }
    }
    master_addr = hp.host == "localhost" ? "127.0.0.1" : hp.host;
    port = hp.port;
    TCPStoreOptions co;
    co.timeout = rs.join_timeout;
    rdzv = std::make_unique<ElasticRendezvous>(std::make_shared<TCPStore>(master_addr, port, co), rs);
  } else if (o.node_rank == 0) {
    // Node 0 hosts the store. On one node it listens on loopback and, unless
    // told a port, on a free one the kernel picks: two jobs never collide.
    TCPStoreServer::Options so;
    so.host = o.max_nodes == 1 ? "127.0.0.1" : "0.0.0.0";
    if (o.max_nodes == 1) master_addr = "127.0.0.1";
    so.port = port;
    so.log = [](const std::string& line) { say("store: " + line); };
    server = std::make_unique<TCPStoreServer>(so);
    port = server->port();
  }

  // Error files (and log files, when asked) live under per-attempt directories.
  std::string base = fmt::format("/tmp/trainrun-{}-{}", run_id, getpid());
  make_dirs(base);
  std::string log_dir = o.log_dir;
  bool files_wanted = false;
  for (int r = 0; r < o.nproc; ++r)
    files_wanted =
        files_wanted || stream_mask_for(o.redirects, r, "--redirects") != 0 || stream_mask_for(o.tee, r, "--tee") != 0;
  if (log_dir.empty() && files_wanted) {
    log_dir = base + "/logs";
    say("--redirects/--tee without --log-dir: writing logs under " + log_dir);
  }

  // The agent service (health and status), when asked: its port goes to the
  // console and next to the error files, where a client on this host finds it.
  std::unique_ptr<AgentService> service;
  if (o.agent_port >= 0) {
    service = std::make_unique<AgentService>(o.agent_host, o.agent_port);
    say(fmt::format("agent service on {}:{}", o.agent_host, service->port()));
    std::ofstream(base + "/agent_port") << service->port() << "\n";
  }
  // What GetStatus reports; updated at each step of the job below.
  auto report = [&](const std::function<void(AgentStatus&)>& change) {
    if (service) service->update(change);
  };
  report([&](AgentStatus& s) {
    s.set_run_id(run_id);
    s.set_host(hostname());
    s.set_node_rank(o.node_rank);
    s.set_nnodes(o.max_nodes);
    s.set_max_restarts(o.max_restarts);
    s.set_phase(AgentStatus::RENDEZVOUS);
  });

  std::map<std::string, std::string> common = {
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"ROLE_NAME", o.role},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"TRAINRUN_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TRAINRUN_RUN_ID", run_id},
      {"TORCHELASTIC_RUN_ID", run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
  };
  if (o.nproc > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
    common["OMP_NUM_THREADS"] = "1";
    say(fmt::format("OMP_NUM_THREADS is not set: setting it to 1 for each of the {} workers (set it to tune)",
                    o.nproc));
  }
  const std::vector<std::string> argv = command_line(o);

  int final_status = 0, restarts = 0, node_rank = o.node_rank, nnodes = o.max_nodes, round = 0;
  for (int attempt = 0;; ++attempt) {
    report([&](AgentStatus& s) {
      s.set_attempt(attempt);
      s.clear_workers();
      s.set_phase(rdzv ? AgentStatus::RENDEZVOUS : s.phase());
    });
    if (rdzv) {
      RendezvousRound rr = rdzv->next_round();
      round = rr.round;
      node_rank = rr.node_rank;
      nnodes = rr.nnodes;
      say(fmt::format("rendezvous '{}' round {}: this is node {} of {}", run_id, round, node_rank, nnodes));
    }
    const int world = nnodes * o.nproc;
    // Workers' key spaces in the store follow the round on elastic jobs (the
    // same on every node), the local restart count on static ones.
    const int restart_count = rdzv ? round : restarts;
    common["WORLD_SIZE"] = common["ROLE_WORLD_SIZE"] = std::to_string(world);
    common["GROUP_RANK"] = std::to_string(node_rank);
    common["GROUP_WORLD_SIZE"] = std::to_string(nnodes);
    AttemptResult result;
    bool reform = false;
    std::vector<Worker> workers;
    std::vector<Failure> failures;
    {
      LogRouter router;
      const std::string attempt_dir = fmt::format("{}/attempt_{}", base, attempt);
      try {
        for (int lr = 0; lr < o.nproc; ++lr) {
          Worker w;
          w.local_rank = lr;
          w.rank = node_rank * o.nproc + lr;
          // Per local rank, as torchrun lays out attempt_N/LOCAL_RANK/error.json.
          make_dirs(fmt::format("{}/{}", attempt_dir, lr));
          w.error_file = fmt::format("{}/{}/error.json", attempt_dir, lr);
          std::map<std::string, std::string> env = common;
          env["RANK"] = env["ROLE_RANK"] = std::to_string(w.rank);
          env["LOCAL_RANK"] = std::to_string(lr);
          env["TRAINRUN_RESTART_COUNT"] = env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(restart_count);
          env["TRAINRUN_ERROR_FILE"] = env["TORCHELASTIC_ERROR_FILE"] = w.error_file;
          WorkerSpec spec{argv, environment(env)};
          int out = -1, err = -1;
          w.process = std::make_unique<WorkerProcess>(spec, &out, &err);
          const bool shown =
              o.shown_local_ranks.empty() ||
              std::find(o.shown_local_ranks.begin(), o.shown_local_ranks.end(), lr) != o.shown_local_ranks.end();
          const int redirected = stream_mask_for(o.redirects, lr, "--redirects"),
                    teed = stream_mask_for(o.tee, lr, "--tee");
          const std::string prefix = fmt::format("[rank{}]:", w.rank);
          for (int stream : {1, 2}) {
            const int bit = stream;  // 1: stdout, 2: stderr
            int file_fd = -1;
            if ((redirected | teed) & bit) {
              std::string dir = fmt::format("{}/{}/attempt_{}/{}", log_dir, run_id, attempt, lr);
              make_dirs(dir);
              file_fd = ::open((dir + (stream == 1 ? "/stdout.log" : "/stderr.log")).c_str(),
                               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            }
            const bool console = shown && !((redirected & bit) && !(teed & bit));
            router.add(stream == 1 ? out : err, prefix, console ? stream : -1, file_fd);
          }
          workers.push_back(std::move(w));
        }
        report([&](AgentStatus& s) {
          s.set_rendezvous_round(round);
          s.set_node_rank(node_rank);
          s.set_nnodes(nnodes);
          for (const Worker& w : workers) {
            agent::v1::WorkerStatus* ws = s.add_workers();
            ws->set_global_rank(w.rank);
            ws->set_local_rank(w.local_rank);
            ws->set_pid(w.process->pid());
            ws->set_state(agent::v1::WorkerStatus::RUNNING);
            ws->set_restarts(restarts);
          }
          s.set_phase(AgentStatus::RUNNING);
        });
      } catch (const DistBackendError& e) {
        say(e.what());
        for (Worker& w : workers) w.process->signal(SIGKILL);
        for (Worker& w : workers)
          while (!w.process->poll()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return 127;
      }

      // Watch until every worker has exited.
      std::optional<Clock::time_point> kill_at;
      Clock::time_point next_membership_check = Clock::now();
      auto stop_all = [&](int sig) {
        report([](AgentStatus& s) { s.set_phase(AgentStatus::STOPPING); });
        for (Worker& w : workers)
          if (w.process->running()) {
            w.process->signal(sig);
            w.stopped_by_us = true;
          }
        if (!kill_at)
          kill_at =
              Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.grace_period));
      };
      for (;;) {
        bool any_running = false;
        for (Worker& w : workers) {
          if (w.reaped) continue;
          if (!w.process->poll()) {
            any_running = true;
            continue;
          }
          w.reaped = true;
          const bool failed = w.process->exit_code() != 0;
          std::string cause;
          if (!failed) {
            w.stopped_by_us = false;  // it finished on its own
          } else if (!w.stopped_by_us) {
            // A failure of its own (not one of the workers we were stopping).
            failures.push_back(Failure{w.local_rank, w.rank, w.process->pid(), w.process->exit_code(),
                                       w.process->term_signal(), w.process->exited_at(),
                                       read_worker_error(w.error_file)});
            if (failures.back().error) cause = failures.back().error->message;
            if (!result.terminate_signal) stop_all(SIGTERM);
          }
          report([&](AgentStatus& s) {
            for (agent::v1::WorkerStatus& ws : *s.mutable_workers()) {
              if (ws.local_rank() != w.local_rank) continue;
              ws.set_state(!failed            ? agent::v1::WorkerStatus::SUCCEEDED
                           : w.stopped_by_us ? agent::v1::WorkerStatus::STOPPED
                                             : agent::v1::WorkerStatus::FAILED);
              ws.set_exit_code(w.process->term_signal() ? 0 : w.process->exit_code());
              ws.set_signal(w.process->term_signal());
              ws.set_root_cause(cause);
            }
          });
        }
        if (!any_running) break;
        if (rdzv && !kill_at && Clock::now() >= next_membership_check) {
          next_membership_check = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(o.monitor_interval));
          if (rdzv->group_must_reform(round)) {
            say(fmt::format("rendezvous '{}': a node joined or left: stopping the workers to re-form", run_id));
            reform = true;
            stop_all(SIGTERM);
          }
        }
        if (kill_at && Clock::now() >= *kill_at) {
          for (Worker& w : workers) w.process->signal(SIGKILL);
        }
        pollfd p{sfd, POLLIN, 0};
        const int wait_ms = static_cast<int>(o.monitor_interval * 1000);
        if (poll(&p, 1, kill_at ? std::min(wait_ms, 20) : wait_ms) > 0) {
          signalfd_siginfo info{};
          while (::read(sfd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
            const int sig = static_cast<int>(info.ssi_signo);
            if (sig == SIGCHLD) continue;
            // USR1/USR2 (pre-emption warnings) pass through; stop signals also end the job.
            for (Worker& w : workers) w.process->signal(sig);
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
              if (!result.terminate_signal) say(fmt::format("received {}: stopping the workers", signal_name(sig)));
              result.terminate_signal = sig;
              stop_all(sig);
            }
          }
        }
      }
      router.drain(std::chrono::seconds(2));
    }
    if (result.terminate_signal) return 128 + result.terminate_signal;
    if (failures.empty() && !reform) {
      final_status = 0;
      break;
    }
    if (failures.empty()) {  // membership changed: re-form, not a failure
      rdzv->request_new_round(round);
      continue;
    }
    print_summary(failures, workers, restarts, o.max_restarts);
    const Failure* f = root_cause(failures);
    final_status = f->signal != 0 ? 128 + f->signal : f->exit_code;
    if (rdzv) rdzv->request_new_round(round);  // the others re-form (without us if we stop here)
    if (restarts >= o.max_restarts) break;
    report([](AgentStatus& s) { s.set_phase(AgentStatus::RESTARTING); });
    ++restarts;
    say(fmt::format("restarting the worker group ({} of {} restarts)", restarts, o.max_restarts));
  }

  report([](AgentStatus& s) { s.set_phase(AgentStatus::DONE); });
  // Node 0 keeps the store up until every node has finished with it (not
  // long when the job failed: the others may be gone).
  if (rdzv) {
    try {
      if (final_status == 0) rdzv->mark_done(round);
      if (server &&
          !rdzv->wait_all_done(round, nnodes, final_status == 0 ? std::chrono::seconds(60) : std::chrono::seconds(5)))
        say("not every node of the last round reported back before the store closed");
    } catch (const std::exception& e) {
      say(fmt::format("the rendezvous store is gone: {}", e.what()));
    }
    return final_status;
  }
  const std::string done_key = fmt::format("trainrun/{}/done/", run_id);
  try {
    if (o.node_rank != 0) {
      TCPStoreOptions co;
      co.timeout = std::chrono::seconds(5);
      TCPStore(master_addr, port, co).set(done_key + std::to_string(o.node_rank), to_bytes("1"));
    } else if (o.max_nodes > 1) {
      const auto patience = final_status == 0 ? std::chrono::seconds(60) : std::chrono::seconds(5);
      TCPStoreOptions co;
      co.timeout = patience;
      TCPStore client("127.0.0.1", port, co);
      std::vector<std::string> keys;
      for (int n = 1; n < o.max_nodes; ++n) keys.push_back(done_key + std::to_string(n));
      client.wait(keys, patience);
    }
  } catch (const std::exception& e) {
    say(fmt::format("the other nodes did not all report back: {}", e.what()));
  }
  return final_status;
}

}  // namespace trainrun
