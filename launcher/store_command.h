#pragma once
// `trainrun store --listen HOST:PORT`: a standalone TCPStore server for
// multi-node jobs and Kubernetes, serving until SIGINT or SIGTERM.
#include <CLI/CLI.hpp>

namespace trainrun {

// Adds the subcommand to the app; it runs when parsed and leaves its exit
// status in exit_code.
void add_store_command(CLI::App& app, int& exit_code);

}  // namespace trainrun
