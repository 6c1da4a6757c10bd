#include "launcher/json_log.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

namespace trainrun {
namespace {

std::string now_iso() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms =
      static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, ms);
  return out;
}

nlohmann::json common(const JsonLogContext& ctx, std::string_view msg) {
  // Invalid UTF-8 from a worker is replaced, never a reason to drop the line.
  return nlohmann::json{{"ts", now_iso()},
                        {"msg", std::string(msg)},
                        {"run_id", ctx.run_id},
                        {"attempt", ctx.attempt},
                        {"host", ctx.host}};
}

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string json_agent_line(const JsonLogContext& ctx, std::string_view who, std::string_view msg) {
  nlohmann::json j = common(ctx, msg);
  j["level"] = "info";
  j["source"] = "agent";
  if (!who.empty()) j["component"] = std::string(who);
  j["pid"] = static_cast<long>(getpid());
  return dump(j);
}

std::string json_worker_line(const JsonLogContext& ctx, int rank, int local_rank, long pid, bool is_stderr,
                             std::string_view msg) {
  nlohmann::json j = common(ctx, msg);
  j["level"] = is_stderr ? "warning" : "info";
  j["source"] = "worker";
  j["rank"] = rank;
  j["local_rank"] = local_rank;
  j["pid"] = pid;
  j["stream"] = is_stderr ? "stderr" : "stdout";
  return dump(j);
}

}  // namespace trainrun
