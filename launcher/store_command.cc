#include "launcher/store_command.h"

#include <signal.h>

#include <cstdio>
#include <memory>

#include "store/host_port.h"
#include "store/store_auth.h"
#include "store/tcp_store_server.h"

namespace trainrun {
namespace {

struct StoreCommandArgs {
  std::string listen;
};

int run_store(const StoreCommandArgs& args) {
  HostPort hp = parse_host_port(args.listen);
  // Block the stop signals before the loop thread starts, so that only
  // sigwait below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  TCPStoreServer::Options options;
  options.host = hp.host;
  options.port = hp.port;
  options.auth_token = store_token_from_env();
  TCPStoreServer server(options);
  const bool v6 = hp.host.find(':') != std::string::npos;
  std::printf("trainrun store: listening on %s%s%s:%u%s\n", v6 ? "[" : "", hp.host.c_str(), v6 ? "]" : "",
              server.port(), options.auth_token ? " (token required)" : "");
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  std::printf("trainrun store: stopping on %s with %lld keys\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
              static_cast<long long>(server.num_keys()));
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_store_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<StoreCommandArgs>();
  CLI::App* cmd = app.add_subcommand("store", "Run a standalone TCPStore server (PyTorch-compatible)");
  cmd->add_option("--listen", args->listen,
                  "HOST:PORT to bind; port 0 picks a free one; 0.0.0.0 or [::] for every interface")
      ->required();
  cmd->callback([args, &exit_code] { exit_code = run_store(*args); });
}

}  // namespace trainrun
