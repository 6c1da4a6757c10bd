#pragma once
// `trainrun status HOST:PORT [--json]`: asks a running agent (started with
// --agent-port) for its job's status and health, and prints it.
#include <CLI/CLI.hpp>

namespace trainrun {

// Adds the subcommand to the app; it runs when parsed and leaves its exit
// status in exit_code (0; 1 when no agent answers).
void add_status_command(CLI::App& app, int& exit_code);

}  // namespace trainrun
