#include "launcher/error_file.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

namespace trainrun {

void record_worker_error(const std::string& message, const std::string& traceback) {
  const char* path = std::getenv("TRAINRUN_ERROR_FILE");
  if (path == nullptr || *path == '\0') path = std::getenv("TORCHELASTIC_ERROR_FILE");
  if (path == nullptr || *path == '\0') return;
  nlohmann::json j;
  j["message"] = message;
  j["traceback"] = traceback;
  j["timestamp"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::ofstream(path) << j.dump() << "\n";
}

std::optional<WorkerError> read_worker_error(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("message")) return std::nullopt;
  WorkerError e;
  const auto& m = j["message"];
  if (m.is_string()) {
    e.message = m.get<std::string>();
    if (j.contains("traceback") && j["traceback"].is_string()) e.traceback = j["traceback"].get<std::string>();
    if (j.contains("timestamp") && j["timestamp"].is_number()) e.timestamp = j["timestamp"].get<double>();
  } else if (m.is_object()) {
    // torchelastic: {"message": {"message": ..., "extraInfo": {"py_callstack": ..., "timestamp": "..."}}}
    if (m.contains("message") && m["message"].is_string()) e.message = m["message"].get<std::string>();
    if (m.contains("extraInfo") && m["extraInfo"].is_object()) {
      const auto& x = m["extraInfo"];
      if (x.contains("py_callstack") && x["py_callstack"].is_string())
        e.traceback = x["py_callstack"].get<std::string>();
      if (x.contains("timestamp") && x["timestamp"].is_string())
        e.timestamp = std::atof(x["timestamp"].get<std::string>().c_str());
    }
  } else {
    return std::nullopt;
  }
  return e;
}

}  // namespace trainrun
