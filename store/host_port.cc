#include "store/host_port.h"

#include <charconv>

#include "base/error.h"

namespace trainrun {

HostPort parse_host_port(const std::string& text) {
  HostPort hp;
  std::string port;
  if (!text.empty() && text[0] == '[') {  // [IPv6]:port
    size_t close = text.find(']');
    TR_CHECK(close != std::string::npos && close + 1 < text.size() && text[close + 1] == ':', ValueError,
             "'{}' is not HOST:PORT (an IPv6 host is written [addr]:port)", text);
    hp.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    TR_CHECK(colon != std::string::npos, ValueError, "'{}' is not HOST:PORT (no port)", text);
    TR_CHECK(text.find(':') == colon, ValueError, "'{}' is not HOST:PORT (write an IPv6 host as [addr]:port)", text);
    hp.host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  TR_CHECK(!hp.host.empty(), ValueError, "'{}' is not HOST:PORT (empty host)", text);
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  TR_CHECK(!port.empty() && ec == std::errc() && ptr == port.data() + port.size() && value <= 65535, ValueError,
           "'{}' is not HOST:PORT (port '{}' is not a number from 0 to 65535)", text, port);
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

}  // namespace trainrun
