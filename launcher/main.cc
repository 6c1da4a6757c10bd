// The trainrun command line. Subcommands live one per file
// (store_command.cc, ...).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "launcher/store_command.h"
#include "tensor/error.h"

int main(int argc, char** argv) {
  CLI::App app{"trainrun: distributed training runtime and launcher"};
  app.require_subcommand(1);
  int exit_code = 0;
  trainrun::add_store_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const trainrun::Error& e) {
    std::fprintf(stderr, "trainrun: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
