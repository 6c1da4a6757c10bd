#pragma once
// --log-format json: one JSON object per line, for log collectors, with the
// fields every line carries: ts (UTC, ISO 8601 with milliseconds), level,
// msg, run_id, attempt, host, pid, and for a worker's line its rank,
// local_rank and stream (stdout or stderr); the agent's own lines have
// "source": "agent", a worker's "source": "worker".
#include <atomic>
#include <memory>
#include <string>
#include <string_view>

namespace trainrun {

struct JsonLogContext {
  std::string run_id, host;
  int attempt = 0;
};

// The context of the agent's own lines, read by every thread that logs
// (the store server's too) and replaced whole when the attempt changes.
class JsonLogState {
 public:
  void set(JsonLogContext ctx) { std::atomic_store(&ctx_, std::make_shared<const JsonLogContext>(std::move(ctx))); }
  std::shared_ptr<const JsonLogContext> get() const { return std::atomic_load(&ctx_); }

 private:
  std::shared_ptr<const JsonLogContext> ctx_ = std::make_shared<const JsonLogContext>();
};

// The agent's line (`who`: the component, e.g. "store", may be empty).
std::string json_agent_line(const JsonLogContext& ctx, std::string_view who, std::string_view msg);
// A worker's line from its stdout or stderr.
std::string json_worker_line(const JsonLogContext& ctx, int rank, int local_rank, long pid, bool is_stderr,
                             std::string_view msg);

}  // namespace trainrun
