#pragma once
// Error files: a failing worker writes a JSON record of why to the path in
// TRAINRUN_ERROR_FILE (also given as TORCHELASTIC_ERROR_FILE); the agent
// reads it for its root-cause summary. Both trainrun's format and
// torchelastic's nested one are read, so PyTorch's @record works too.
#include <optional>
#include <string>

namespace trainrun {

struct WorkerError {
  std::string message;
  std::string traceback;  // Python traceback or C++ context; may be empty
  double timestamp = 0;   // seconds since the epoch; 0 when unknown
};

// Worker side (C++): writes {"message", "traceback", "timestamp"} to the
// error file named in the environment; does nothing when none is set.
void record_worker_error(const std::string& message, const std::string& traceback = "");

// Agent side: the record at path, or nothing when there is no (valid) file.
std::optional<WorkerError> read_worker_error(const std::string& path);

}  // namespace trainrun
