#pragma once
// The TCPStore server: one libuv event loop on one thread it owns, a small
// state machine per connection that parses requests incrementally, and WAITs
// parked per key until an operation creates the key. Serves PyTorch's modern
// protocol and torch 1.13's, told apart by the first bytes of a connection.
//
// On a modern connection, requests sent behind a parked WAIT are served after
// it (CANCEL_WAIT overtakes it), so trainrun clients send WAIT and GET in one
// write: a blocking get in one round trip (torch's client takes two). A
// torch 1.13 connection is served meanwhile, as 1.13's own server does.
//
// Limits (wire::Limits): keys up to 64 KiB, values up to 256 MiB, 1M keys
// per request, 512 MiB per request; 1024 parked WAITs per torch 1.13
// connection (its client leaves one behind per timeout); 64 KiB of requests
// held behind a parked WAIT, and 64 MiB of unread replies, before the server
// stops reading from that client until it catches up. A request over a
// limit, or malformed, closes that connection only, with a log line naming
// the peer and the reason; a connection that sends nothing, or stops
// mid-request, holds only its socket and buffer.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "store/wire_protocol.h"

namespace trainrun {

class TCPStoreServer {
 public:
  struct Options {
    // The address to bind: a host name, an IPv4 or an IPv6 address. "0.0.0.0"
    // or "::" (every interface) only when asked for.
    std::string host = "127.0.0.1";
    uint16_t port = 0;  // 0: the kernel picks a free port; see port()
    // A socket the caller already bound (PyTorch's master_listen_fd): the server listens on it and owns it
    // (closes it) instead of binding host:port.
    std::optional<int> listen_fd;
    // Sized for thousands of ranks connecting at once (the kernel caps it at
    // net.core.somaxconn).
    int backlog = 16384;
    // When set, only trainrun clients that prove they know it are served.
    std::optional<std::string> auth_token;
    wire::Limits limits;
    // Where log lines go (default: stderr, prefixed "trainrun store: ").
    std::function<void(const std::string&)> log;
  };

  // Binds, listens and starts the loop thread; throws DistBackendError
  // naming host:port when it cannot.
  explicit TCPStoreServer(Options options);
  // Closes every connection (pending waits end with the connection) and joins the loop thread.
  ~TCPStoreServer();
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const;
  const std::string& host() const;

  // Counters, read from any thread.
  int64_t num_connections() const;
  int64_t num_keys() const;
  int64_t num_parked_waits() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainrun
