#pragma once
// How the agent names what went wrong: a worker's failure (exit code or
// signal, time, the message and traceback of its error file), the root
// cause among several (the earliest), and the summary it prints when a
// worker group fails.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/error_file.h"

namespace trainrun {

struct Failure {
  int local_rank, rank;
  pid_t pid;
  int exit_code, signal;
  std::chrono::system_clock::time_point when;
  std::optional<WorkerError> error;
};

// "SIGTERM (15)", or "signal 70" for one without a name.
std::string signal_name(int sig);
// This machine's host name, as reports show it.
std::string this_host();

// The earliest failure: by the error file's timestamp when workers wrote
// one (that is when the error happened), else by exit time. failures must
// not be empty.
const Failure& root_cause(const std::vector<Failure>& failures);

// Prints "worker group failed (attempt N of M)" with the root cause, then
// the other failed ranks and those the agent stopped.
void print_failure_summary(const std::vector<Failure>& failures, const std::vector<int>& stopped_ranks, int attempt,
                           int max_restarts);

}  // namespace trainrun
