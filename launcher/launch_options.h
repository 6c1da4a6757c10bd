#pragma once
// The launcher's flags: torchrun's names and meanings (dashes or
// underscores), each also settable through the PET_* variable torchrun
// reads, so that existing commands and Kubernetes operators work unchanged.
#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace trainrun {

struct LaunchOptions {
  std::string nproc_per_node = "1";  // a number, or cpu / gpu / auto
  std::string nnodes = "1";          // N or MIN:MAX
  int node_rank = 0;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::string rdzv_conf;
  bool standalone = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port, chosen by binding (single node only)
  std::string local_addr;
  int max_restarts = 0;
  double monitor_interval = 0.1;  // seconds between health checks (SIGCHLD wakes us sooner)
  double grace_period = 5.0;      // seconds from SIGTERM to SIGKILL when stopping workers
  std::string role = "default";
  std::string start_method = "spawn";  // torchrun's --start-method: accepted (workers are always fork+exec'd)
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  bool legacy_launch = false;  // torch.distributed.launch: --local-rank=N for each worker unless use_env
  bool use_env = false;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  // The agent's gRPC service (health and status): off when negative; 0 picks a free port.
  int agent_port = -1;
  std::string agent_host = "127.0.0.1";  // the pod's address on Kubernetes, so probes reach it
  // TLS for the agent service: PEM certificate chain and private key (both, or neither: plaintext).
  std::string agent_tls_cert, agent_tls_key;
  // Prometheus metrics at http://agent_host:metrics_port/metrics: off when negative; 0 picks a free port.
  int metrics_port = -1;
  std::string log_format = "text";  // or "json": one JSON object per line (the agent's and the workers')
  std::string program;
  std::vector<std::string> program_args;

  // Resolved by resolve().
  int nproc = 1;
  int min_nodes = 1, max_nodes = 1;
  std::vector<int> shown_local_ranks;  // empty: all
};

// Adds every flag to app (the script and its arguments are not parsed).
void add_launch_flags(CLI::App& app, LaunchOptions& o);

// The index in argv of the script: the first argument that is neither a
// flag nor a flag's value (or the one after "--"); argc when there is none.
// Throws ValueError naming an unknown flag met before it.
size_t find_program(const CLI::App& app, int argc, char** argv);

// Checks values and fills the resolved fields; throws ValueError naming the
// flag and what is wrong with its value.
void resolve(LaunchOptions& o);

// "0".."3", or per local rank "0:1,1:2": which streams (1 stdout, 2 stderr,
// 3 both) of a local rank go to files (redirects) or to files and console (tee).
int stream_mask_for(const std::string& spec, int local_rank, const char* flag);

}  // namespace trainrun
