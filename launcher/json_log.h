#pragma once
// --log-format json: one JSON object per line, for log collectors, with the
// fields every line carries: ts (UTC, ISO 8601 with milliseconds), level,
// msg, run_id, attempt, host, pid, and for a worker's line its rank,
// local_rank and stream (stdout or stderr); the agent's own lines have
// "source": "agent", a worker's "source": "worker".
#include <string>
#include <string_view>

namespace trainrun {

struct JsonLogContext {
  std::string run_id, host;
  int attempt = 0;
};

// The agent's line (`who`: the component, e.g. "store", may be empty).
std::string json_agent_line(const JsonLogContext& ctx, std::string_view who, std::string_view msg);
// A worker's line from its stdout or stderr.
std::string json_worker_line(const JsonLogContext& ctx, int rank, int local_rank, long pid, bool is_stderr,
                             std::string_view msg);

}  // namespace trainrun
