#pragma once
// The local elastic agent behind `trainrun [flags] script.py args...`: hosts
// the store (node 0), starts one worker per local rank with torchrun's
// environment, watches them, stops the rest at the first failure, restarts
// the group up to --max-restarts times, forwards signals, routes logs, and
// when the job fails prints a root-cause summary of the earliest failure.
#include "launcher/launch_options.h"

namespace trainrun {

// Returns the process exit status: 0, the failing worker's exit code,
// 128 + signal, or 127 when the program cannot be started.
int run_agent(LaunchOptions options);

}  // namespace trainrun
