#pragma once
// Clients of a running agent's service (started with --agent-port):
//   trainrun status HOST:PORT [--json]   the job's status and readiness
//   trainrun events HOST:PORT [--json]   its events, from the start, until it ends
//   trainrun stop HOST:PORT [--token T]  ends it gracefully
//   trainrun stacks HOST:PORT [--token T] every running worker's Python stacks
//   trainrun flight HOST:PORT|DIR        what the workers' flight records say
//   trainrun drain HOST:PORT             workers checkpoint and exit with 138
// (stop, stacks, flight and drain need the job's token: --token,
// TRAINRUN_AGENT_TOKEN, or the agent's token file on this host; --tls-ca
// verifies an agent serving TLS)
#include <CLI/CLI.hpp>

namespace trainrun {

// Adds the subcommands to the app; the one parsed runs and leaves its exit
// status in exit_code (0; 1 when no agent answers).
void add_status_command(CLI::App& app, int& exit_code);
void add_events_command(CLI::App& app, int& exit_code);
void add_stop_command(CLI::App& app, int& exit_code);
void add_stacks_command(CLI::App& app, int& exit_code);
void add_flight_command(CLI::App& app, int& exit_code);
void add_drain_command(CLI::App& app, int& exit_code);

}  // namespace trainrun
