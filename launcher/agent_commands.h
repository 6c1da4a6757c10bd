#pragma once
// Clients of a running agent's service (started with --agent-port):
//   trainrun status HOST:PORT [--json]   the job's status and readiness
//   trainrun events HOST:PORT [--json]   its events, from the start, until it ends
//   trainrun stop HOST:PORT [--token T]  ends it gracefully
//   trainrun stacks HOST:PORT [--token T] every running worker's Python stacks
// (stop and stacks need the job's token: --token, TRAINRUN_AGENT_TOKEN, or
// the agent's token file on this host)
#include <CLI/CLI.hpp>

namespace trainrun {

// Adds the subcommands to the app; the one parsed runs and leaves its exit
// status in exit_code (0; 1 when no agent answers).
void add_status_command(CLI::App& app, int& exit_code);
void add_events_command(CLI::App& app, int& exit_code);
void add_stop_command(CLI::App& app, int& exit_code);
void add_stacks_command(CLI::App& app, int& exit_code);

}  // namespace trainrun
