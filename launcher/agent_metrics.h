#pragma once
// The agent's Prometheus metrics, served on --metrics-port at /metrics in
// the text exposition format: the agent's own counters and gauges, and the
// values its workers report with torchelastic's
// put_metric(name, value, group) (the trainrun package writes each worker's
// latest values to a file in TRAINRUN_METRICS_DIR; the agent reads them at
// each scrape).
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace trainrun {

class AgentMetrics {
 public:
  // worker_metrics_dir: where the workers' files are (TRAINRUN_METRICS_DIR).
  explicit AgentMetrics(std::string worker_metrics_dir) : worker_metrics_dir_(std::move(worker_metrics_dir)) {}
  // From the agent's thread, as the job goes:
  void rendezvous_took(double seconds);
  void workers_started(int n);
  enum class Exit { Success, Failure, Stopped };
  void worker_exited(Exit how);
  void restarted();
  // The whole page.
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::string worker_metrics_dir_;
  double rendezvous_seconds_ = 0;
  int64_t rendezvous_total_ = 0, running_ = 0, restarts_ = 0;
  int64_t exits_success_ = 0, exits_failure_ = 0, exits_stopped_ = 0;
};

// A small HTTP server for /metrics on its own thread (joined on destruction).
class MetricsServer {
 public:
  // Binds host:port (0: a free port); throws DistBackendError naming the address when it cannot.
  MetricsServer(const std::string& host, int port, const AgentMetrics& metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  int port() const { return port_; }

 private:
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace trainrun
