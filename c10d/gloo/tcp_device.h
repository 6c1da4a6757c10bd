#pragma once
// The Gloo TCP device of a process group: the address other ranks reach
// this one at, chosen as PyTorch chooses it.
#include <memory>
#include <string>

namespace gloo {
namespace transport {
class Device;
}
}  // namespace gloo

namespace trainrun {
namespace c10d {

// hostname when given; else GLOO_SOCKET_IFNAME's interface when set; else
// this host's name when it resolves to an address we can bind; else loopback.
std::shared_ptr<gloo::transport::Device> make_device(const std::string& hostname);

}  // namespace c10d
}  // namespace trainrun
