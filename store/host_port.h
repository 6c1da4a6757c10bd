#pragma once
// "HOST:PORT" as given on the command line: "127.0.0.1:29500",
// "[::1]:29500", "node-0.svc:0".
#include <cstdint>
#include <string>

namespace trainrun {

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// Throws ValueError naming the text and what is wrong with it.
HostPort parse_host_port(const std::string& text);

}  // namespace trainrun
