#include "c10d/gloo/tcp_device.h"

#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

namespace trainrun {
namespace c10d {
namespace {

// True when `host` resolves to an address this process can bind (so peers
// can reach it there), as PyTorch checks before using the host name.
bool resolves_to_bindable_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0) return false;
  bool ok = false;
  for (addrinfo* a = result; a != nullptr && !ok; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    ok = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
  }
  freeaddrinfo(result);
  return ok;
}

}  // namespace

std::shared_ptr<gloo::transport::Device> make_device(const std::string& hostname) {
  gloo::transport::tcp::attr attr;
  if (!hostname.empty()) {
    attr.hostname = hostname;
  } else if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr && *iface != '\0') {
    attr.iface = iface;
  } else {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    attr.hostname = resolves_to_bindable_address(name) ? name : "127.0.0.1";
  }
  return gloo::transport::tcp::CreateDevice(attr);
}

}  // namespace c10d
}  // namespace trainrun
