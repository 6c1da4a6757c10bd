// The trainrun command line:
//   trainrun [torchrun's flags] script.py [script args]   (run_agent, agent.cc)
//   trainrun store --listen HOST:PORT                     (store_command.cc)
//   trainrun status|events|stop|stacks HOST:PORT          (agent_commands.cc)
#include <CLI/CLI.hpp>

#include <cstring>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "launcher/agent.h"
#include "launcher/launch_options.h"
#include "launcher/agent_commands.h"
#include "launcher/store_command.h"

namespace {

// `trainrun store ...` and `trainrun status ...`: subcommands with flags of their own.
int subcommand_main(int argc, char** argv) {
  CLI::App app{"trainrun subcommands"};
  app.require_subcommand(1);
  int exit_code = 0;
  trainrun::add_store_command(app, exit_code);
  trainrun::add_status_command(app, exit_code);
  trainrun::add_events_command(app, exit_code);
  trainrun::add_stop_command(app, exit_code);
  trainrun::add_stacks_command(app, exit_code);
  trainrun::add_flight_command(app, exit_code);
  trainrun::add_drain_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const trainrun::Error& e) {
    trainrun::log_line("", e.what());
    return 1;
  }
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1)
    for (const char* sub : {"store", "status", "events", "stop", "stacks", "flight", "drain"})
      if (std::strcmp(argv[1], sub) == 0) return subcommand_main(argc, argv);
  CLI::App app{
      "trainrun: launch a distributed training job, one worker per process, as torchrun does.\n"
      "  trainrun --nproc-per-node 4 train.py --lr 3e-4\n"
      "Flags take torchrun's names (dashes or underscores) and its PET_* environment variables.\n"
      "Also: trainrun store --listen HOST:PORT (a standalone store server);\n"
      "      trainrun status|events|stop|stacks|flight|drain HOST:PORT (a running job's status, events, a "
      "graceful stop, its workers' stacks or flight records, a drain, through its --agent-port)."};
  trainrun::LaunchOptions options;
  trainrun::add_launch_flags(app, options);
  try {
    // Everything from the script on belongs to the script, even words that
    // look like our flags.
    const size_t program = trainrun::find_program(app, argc, argv);
    app.parse(static_cast<int>(program), argv);
    if (program >= static_cast<size_t>(argc)) {
      trainrun::log_line("", "no script given (usage: trainrun [flags] script.py [args]; see --help)");
      return 2;
    }
    options.program = argv[program];
    for (int i = static_cast<int>(program) + 1; i < argc; ++i) options.program_args.push_back(argv[i]);
    return trainrun::run_agent(options);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    trainrun::log_line("", std::string(e.what()) + " (see trainrun --help)");
    return 2;
  } catch (const trainrun::ValueError& e) {
    trainrun::log_line("", e.what());
    return 2;
  } catch (const trainrun::NotImplementedError& e) {
    trainrun::log_line("", e.what());
    return 2;
  } catch (const trainrun::Error& e) {
    trainrun::log_line("", e.what());
    return 1;
  }
}
