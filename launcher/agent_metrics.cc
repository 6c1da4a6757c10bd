#include "launcher/agent_metrics.h"

#include <dirent.h>
#include <fmt/format.h>
#include <httplib.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"

namespace trainrun {
namespace {

// A label value in the exposition format: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void family(std::string& page, const char* name, const char* type, const char* help) {
  page += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// Every worker's latest put_metric values: rank.json files of {"rank": R, "metrics": {"group/name": value}}.
// A file being replaced or half-written is skipped until the next scrape.
std::string worker_metrics(const std::string& dir) {
  std::map<std::string, std::string> lines;  // sorted, so the page is stable
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return "";
  while (dirent* e = readdir(d)) {
    const std::string file = e->d_name;
    if (file.size() < 6 || file.compare(file.size() - 5, 5, ".json") != 0) continue;
    std::ifstream in(dir + "/" + file);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("rank") || !j["metrics"].is_object()) continue;
    const std::string rank = std::to_string(j["rank"].get<int64_t>());
    for (const auto& [key, value] : j["metrics"].items()) {
      if (!value.is_number()) continue;
      const size_t slash = key.find('/');
      const std::string group = slash == std::string::npos ? "" : key.substr(0, slash);
      const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
      lines[rank + "\n" + key] = fmt::format("trainrun_worker_metric{{rank=\"{}\",group=\"{}\",name=\"{}\"}} {}\n",
                                             rank, label(group), label(name), value.get<double>());
    }
  }
  closedir(d);
  std::string out;
  for (const auto& [_, line] : lines) out += line;
  return out;
}

}  // namespace

void AgentMetrics::rendezvous_took(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  rendezvous_seconds_ = seconds;
  ++rendezvous_total_;
}

void AgentMetrics::workers_started(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  running_ = n;
}

void AgentMetrics::worker_exited(Exit how) {
  std::lock_guard<std::mutex> lock(mu_);
  --running_;
  (how == Exit::Success ? exits_success_ : how == Exit::Failure ? exits_failure_ : exits_stopped_) += 1;
}

void AgentMetrics::restarted() {
  std::lock_guard<std::mutex> lock(mu_);
  ++restarts_;
}

std::string AgentMetrics::render() const {
  std::string page;
  {
    std::lock_guard<std::mutex> lock(mu_);
    family(page, "trainrun_build_info", "gauge", "The launcher agent serving these metrics.");
    page += "trainrun_build_info{component=\"agent\"} 1\n";
    family(page, "trainrun_workers", "gauge", "Local worker processes of the current attempt that are running.");
    page += fmt::format("trainrun_workers{{state=\"running\"}} {}\n", running_);
    family(page, "trainrun_restarts_total", "counter", "Restarts of the worker group after a failure.");
    page += fmt::format("trainrun_restarts_total {}\n", restarts_);
    family(page, "trainrun_worker_exits_total", "counter", "Worker exits, by how they ended.");
    page += fmt::format("trainrun_worker_exits_total{{reason=\"success\"}} {}\n", exits_success_);
    page += fmt::format("trainrun_worker_exits_total{{reason=\"failure\"}} {}\n", exits_failure_);
    page += fmt::format("trainrun_worker_exits_total{{reason=\"stopped\"}} {}\n", exits_stopped_);
    family(page, "trainrun_rendezvous_total", "counter", "Rendezvous rounds this node took part in.");
    page += fmt::format("trainrun_rendezvous_total {}\n", rendezvous_total_);
    family(page, "trainrun_rendezvous_seconds", "gauge", "How long the last rendezvous took.");
    page += fmt::format("trainrun_rendezvous_seconds {}\n", rendezvous_seconds_);
  }
  family(page, "trainrun_worker_metric", "gauge",
         "The latest value each worker reported with put_metric(name, value, group).");
  page += worker_metrics(worker_metrics_dir_);
  return page;
}

MetricsServer::MetricsServer(const std::string& host, int port, const AgentMetrics& metrics)
    : server_(std::make_unique<httplib::Server>()) {
  server_->Get("/metrics", [&metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  port_ = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  TR_CHECK(port_ > 0, DistBackendError, "metrics: cannot listen on {}:{} (is the port taken?)", host, port);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace trainrun
