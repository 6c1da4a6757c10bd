#include "launcher/launch_options.h"

#include <unistd.h>

#include <charconv>
#include <thread>

#include "base/error.h"
#include "launcher/gpu_count.h"

namespace trainrun {
namespace {

int parse_int(const std::string& text, const char* flag) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  TR_CHECK(!text.empty() && ec == std::errc() && ptr == text.data() + text.size(), ValueError,
           "{}: '{}' is not an integer", flag, text);
  return v;
}

// --nproc-per-node and its aliases, in torchrun's spellings.
std::string names(const char* dashed) {
  std::string d = dashed, u = dashed;
  for (size_t i = 2; i < u.size(); ++i)
    if (u[i] == '-') u[i] = '_';
  return d == u ? d : d + "," + u;
}

}  // namespace

void add_launch_flags(CLI::App& app, LaunchOptions& o) {
  app.add_option(names("--nproc-per-node") + ",--nproc", o.nproc_per_node,
                 "Workers per node: a number, or cpu (one per core), gpu (one per GPU), auto (gpu if any, "
                 "else cpu)")
      ->envname("PET_NPROC_PER_NODE");
  app.add_option("--nnodes", o.nnodes, "Number of nodes, N or MIN:MAX")->envname("PET_NNODES");
  app.add_option(names("--node-rank"), o.node_rank, "This node's rank (static rendezvous)")->envname("PET_NODE_RANK");
  app.add_option(names("--rdzv-backend"), o.rdzv_backend,
                 "Rendezvous backend: static (fixed nodes, node 0 hosts the store) or c10d (elastic, MIN:MAX nodes)")
      ->envname("PET_RDZV_BACKEND");
  app.add_option(names("--rdzv-endpoint"), o.rdzv_endpoint, "HOST[:PORT] of the rendezvous store")
      ->envname("PET_RDZV_ENDPOINT");
  app.add_option(names("--rdzv-id"), o.rdzv_id, "Job id shared by every node")->envname("PET_RDZV_ID");
  app.add_option(names("--rdzv-conf"), o.rdzv_conf, "Rendezvous settings, k=v,...")->envname("PET_RDZV_CONF");
  app.add_flag("--standalone", o.standalone, "Single node: host the store here on a free port")
      ->envname("PET_STANDALONE");
  app.add_option(names("--master-addr"), o.master_addr, "Address of node 0 (static rendezvous)")
      ->envname("PET_MASTER_ADDR");
  app.add_option(names("--master-port"), o.master_port, "Port of node 0's store; 0 on one node: a free one")
      ->envname("PET_MASTER_PORT");
  app.add_option(names("--local-addr"), o.local_addr, "This node's address as the others see it")
      ->envname("PET_LOCAL_ADDR");
  app.add_option(names("--max-restarts"), o.max_restarts, "Restarts of the worker group before giving up")
      ->envname("PET_MAX_RESTARTS");
  app.add_option(names("--monitor-interval"), o.monitor_interval, "Seconds between health checks")
      ->envname("PET_MONITOR_INTERVAL");
  app.add_option(names("--grace-period"), o.grace_period,
                 "Seconds between SIGTERM and SIGKILL when the workers are stopped")
      ->envname("TRAINRUN_GRACE_PERIOD");
  app.add_option("--role", o.role, "Worker role name")->envname("PET_ROLE");
  app.add_option(names("--start-method"), o.start_method,
                 "torchrun's spawn, fork or forkserver: accepted; every worker is a fresh process (fork + exec), "
                 "as spawn starts them")
      ->check(CLI::IsMember({"spawn", "fork", "forkserver"}))
      ->envname("PET_START_METHOD");
  app.add_flag("-m,--module", o.module, "Run the script as a Python module (python -m)")->envname("PET_MODULE");
  app.add_flag(names("--no-python"), o.no_python, "Run the program directly, not under Python")
      ->envname("PET_NO_PYTHON");
  app.add_flag(names("--run-path"), o.run_path, "Run the script with runpy.run_path")->envname("PET_RUN_PATH");
  app.add_flag("--legacy-launch", o.legacy_launch,
               "torch.distributed.launch's way (python -m trainrun.distributed.launch sets it): each worker also "
               "gets --local-rank=N as its first argument, unless --use-env");
  app.add_flag(names("--use-env"), o.use_env,
               "With --legacy-launch: workers read LOCAL_RANK from the environment only (torchrun's way, always)");
  app.add_option(names("--agent-port"), o.agent_port,
                 "Serve the agent's gRPC health and status service on this port (0: a free one, printed)")
      ->envname("TRAINRUN_AGENT_PORT");
  app.add_option(names("--agent-host"), o.agent_host,
                 "Address the agent service and metrics bind (default 127.0.0.1)")
      ->envname("TRAINRUN_AGENT_HOST");
  app.add_option(names("--agent-tls-cert"), o.agent_tls_cert,
                 "Serve the agent service over TLS with this PEM certificate chain (with --agent-tls-key)")
      ->envname("TRAINRUN_AGENT_TLS_CERT");
  app.add_option(names("--agent-tls-key"), o.agent_tls_key, "The PEM private key of --agent-tls-cert")
      ->envname("TRAINRUN_AGENT_TLS_KEY");
  app.add_option(names("--log-format"), o.log_format,
                 "text, or json: every line (the agent's and the workers') as one JSON object")
      ->envname("TRAINRUN_LOG_FORMAT");
  app.add_option(names("--metrics-port"), o.metrics_port,
                 "Serve Prometheus metrics at /metrics on this port (0: a free one, printed)")
      ->envname("TRAINRUN_METRICS_PORT");
  app.add_option(names("--log-dir"), o.log_dir, "Directory for per-attempt, per-rank log files")
      ->envname("PET_LOG_DIR");
  app.add_option("-r,--redirects", o.redirects,
                 "Streams sent to log files only: 0 none, 1 stdout, 2 stderr, 3 both, or per rank 0:1,1:2")
      ->envname("PET_REDIRECTS");
  app.add_option("-t,--tee", o.tee, "Streams sent to log files and the console (same values as --redirects)")
      ->envname("PET_TEE");
  app.add_option(names("--local-ranks-filter"), o.local_ranks_filter,
                 "Local ranks whose output the console shows, e.g. 0 or 0,2")
      ->envname("PET_LOCAL_RANKS_FILTER");
}

size_t find_program(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") return static_cast<size_t>(i + 1);
    if (a.size() < 2 || a[0] != '-') return static_cast<size_t>(i);
    std::string name = a.substr(0, a.find('='));
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) {
      if (name == "-h" || name == "--help") continue;
      throw ValueError(fmt::format("unknown flag '{}' before the script (see trainrun --help)", name));
    }
    const bool takes_value = opt->get_expected_min() > 0 && a.find('=') == std::string::npos;
    if (takes_value) ++i;
  }
  return static_cast<size_t>(argc);
}

void resolve(LaunchOptions& o) {
  TR_CHECK(o.agent_tls_cert.empty() == o.agent_tls_key.empty(), ValueError,
           "--agent-tls-cert and --agent-tls-key go together (got only {})",
           o.agent_tls_cert.empty() ? "--agent-tls-key" : "--agent-tls-cert");
  TR_CHECK(o.agent_tls_cert.empty() || o.agent_port >= 0, ValueError,
           "--agent-tls-cert: TLS is for the agent service; give --agent-port too");
  TR_CHECK(o.agent_port >= -1 && o.agent_port <= 65535, ValueError,
           "--agent-port: {} is not a port (0 picks a free one; leave it out for no agent service)", o.agent_port);
  TR_CHECK(o.log_format == "text" || o.log_format == "json", ValueError,
           "--log-format: '{}' is not a format (text or json)", o.log_format);
  TR_CHECK(o.metrics_port >= -1 && o.metrics_port <= 65535, ValueError,
           "--metrics-port: {} is not a port (0 picks a free one; leave it out for no metrics)", o.metrics_port);
  const std::string& n = o.nproc_per_node;
  const GpuCount gpus = n == "gpu" || n == "auto" ? count_gpus() : GpuCount{};
  if (n == "cpu" || (n == "auto" && gpus.count == 0)) {
    o.nproc = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  } else if (n == "gpu" || n == "auto") {
    // One worker per visible GPU, as torchrun does.
    TR_CHECK(gpus.count > 0, ValueError, "--nproc-per-node gpu: {}", gpus.reason);
    o.nproc = gpus.count;
  } else {
    o.nproc = parse_int(n, "--nproc-per-node");
    TR_CHECK(o.nproc >= 1, ValueError, "--nproc-per-node: must be at least 1, got {}", o.nproc);
  }
  const size_t colon = o.nnodes.find(':');
  if (colon == std::string::npos) {
    o.min_nodes = o.max_nodes = parse_int(o.nnodes, "--nnodes");
  } else {
    o.min_nodes = parse_int(o.nnodes.substr(0, colon), "--nnodes");
    o.max_nodes = parse_int(o.nnodes.substr(colon + 1), "--nnodes");
  }
  TR_CHECK(o.min_nodes >= 1 && o.min_nodes <= o.max_nodes, ValueError,
           "--nnodes: '{}' must be N >= 1 or MIN:MAX with 1 <= MIN <= MAX", o.nnodes);
  TR_CHECK(o.rdzv_backend == "static" || o.rdzv_backend == "c10d", ValueError,
           "--rdzv-backend: '{}' is not one of static, c10d", o.rdzv_backend);
  if (o.standalone) {
    // One node, store on a free local port: the static path does exactly that.
    o.rdzv_backend = "static";
    o.min_nodes = o.max_nodes = 1;
    o.rdzv_endpoint.clear();
  }
  if (o.rdzv_backend == "static") {
    TR_CHECK(o.min_nodes == o.max_nodes, ValueError,
             "--nnodes {}: a range needs the elastic rendezvous (--rdzv-backend c10d --rdzv-endpoint HOST:PORT)",
             o.nnodes);
    TR_CHECK(o.node_rank >= 0 && o.node_rank < o.max_nodes, ValueError, "--node-rank: {} is not in [0, {})",
             o.node_rank, o.max_nodes);
  } else {
    TR_CHECK(!o.rdzv_endpoint.empty(), ValueError,
             "--rdzv-backend c10d needs --rdzv-endpoint HOST[:PORT] (or use --standalone on one node)");
  }
  TR_CHECK(o.master_port >= 0 && o.master_port <= 65535, ValueError, "--master-port: {} is not a port", o.master_port);
  TR_CHECK(o.rdzv_backend != "static" || o.max_nodes == 1 || o.master_port != 0 || !o.rdzv_endpoint.empty(), ValueError,
           "--master-port: a multi-node job needs a fixed port that every node knows (port 0 is single-node only)");
  TR_CHECK(o.max_restarts >= 0, ValueError, "--max-restarts: must be >= 0, got {}", o.max_restarts);
  TR_CHECK(o.monitor_interval > 0, ValueError, "--monitor-interval: must be positive, got {}", o.monitor_interval);
  TR_CHECK(o.grace_period >= 0, ValueError, "--grace-period: must be >= 0, got {}", o.grace_period);
  TR_CHECK(!(o.module && o.no_python), ValueError, "--module and --no-python cannot be combined");
  TR_CHECK(!(o.legacy_launch && o.no_python && !o.use_env), ValueError,
           "When using the '--no-python' flag, you must also set the '--use-env' flag (the program would get "
           "--local-rank=N as an argument)");
  if (!o.rdzv_endpoint.empty() && o.rdzv_backend == "static") {
    // torchrun accepts the endpoint as the master address for static jobs too.
    const size_t c = o.rdzv_endpoint.rfind(':');
    o.master_addr = o.rdzv_endpoint.substr(0, c);
    if (c != std::string::npos) o.master_port = parse_int(o.rdzv_endpoint.substr(c + 1), "--rdzv-endpoint");
  }
  for (int r = 0; r < o.nproc; ++r) {
    stream_mask_for(o.redirects, r, "--redirects");
    stream_mask_for(o.tee, r, "--tee");
  }
  o.shown_local_ranks.clear();
  if (!o.local_ranks_filter.empty()) {
    size_t start = 0;
    while (start <= o.local_ranks_filter.size()) {
      size_t comma = o.local_ranks_filter.find(',', start);
      std::string item =
          o.local_ranks_filter.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      int r = parse_int(item, "--local-ranks-filter");
      TR_CHECK(r >= 0 && r < o.nproc, ValueError, "--local-ranks-filter: local rank {} is not in [0, {})", r, o.nproc);
      o.shown_local_ranks.push_back(r);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
}

int stream_mask_for(const std::string& spec, int local_rank, const char* flag) {
  if (spec.find(':') == std::string::npos) {
    int v = parse_int(spec, flag);
    TR_CHECK(v >= 0 && v <= 3, ValueError, "{}: {} is not 0 (none), 1 (stdout), 2 (stderr) or 3 (both)", flag, v);
    return v;
  }
  size_t start = 0;
  while (start < spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t colon = item.find(':');
    TR_CHECK(colon != std::string::npos, ValueError, "{}: '{}' is not LOCAL_RANK:STREAMS", flag, item);
    int r = parse_int(item.substr(0, colon), flag), v = parse_int(item.substr(colon + 1), flag);
    TR_CHECK(v >= 0 && v <= 3, ValueError, "{}: {} is not 0, 1, 2 or 3", flag, v);
    if (r == local_rank) return v;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return 0;
}

}  // namespace trainrun
