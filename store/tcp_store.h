#pragma once
// The TCPStore client (and, with is_master, the server it starts in-process),
// wire-compatible with PyTorch: user keys travel as "/key" like torch's, so a
// torch job and a trainrun job see the same keys on one server.
//
// One blocking connection per TCPStore, one operation at a time. Connecting
// retries with exponential backoff and jitter until the timeout. Every call
// has a deadline (the store's timeout, or wait()'s own); a wait that times
// out is cancelled on the wire (or the connection is replaced), so the store
// stays usable after a TimeoutError.
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "store/store.h"
#include "store/tcp_client_socket.h"
#include "store/tcp_store_server.h"
#include "store/wire_protocol.h"

namespace trainrun {

struct TCPStoreOptions {
  bool is_master = false;                // start a TCPStoreServer on host:port in this process
  std::optional<int64_t> num_workers;    // every client registers under "init/" when set
  bool wait_for_workers = true;          // the master's constructor waits for num_workers registrations
  Milliseconds timeout = Store::kDefaultTimeout;
  // kUnknown: try the modern protocol and fall back to torch 1.13's when the
  // server drops the handshake.
  wire::Dialect protocol = wire::Dialect::kUnknown;
  // Shared secret for trainrun servers that require one; unset: taken from
  // TRAINRUN_STORE_TOKEN when that is set.
  std::optional<std::string> auth_token;
  // The master's server listens on this already-bound socket instead of binding host:port (and owns it).
  std::optional<int> master_listen_fd;
  // PyTorch's choice between its libuv server and its legacy one. trainrun has one server, which serves both;
  // as PyTorch's libuv server, it refuses master_listen_fd unless use_libuv is false.
  bool use_libuv = true;
};

class TCPStore final : public Store {
 public:
  TCPStore(std::string host, uint16_t port, TCPStoreOptions options = {});
  ~TCPStore() override;

  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const Bytes& value) override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;

  const std::string& host() const { return host_; }
  bool use_libuv() const { return options_.use_libuv; }
  uint16_t port() const { return port_; }
  // The protocol the server turned out to speak.
  wire::Dialect dialect() const;
  // True when the server is trainrun's and gets serve a blocking get in one round trip.
  bool server_orders_waits() const;
  // Blocks until num_workers clients have registered (what the master's
  // constructor does when wait_for_workers is set); TimeoutError otherwise.
  void wait_for_workers(Milliseconds timeout);
  // The in-process server when this store is the master, else null.
  TCPStoreServer* server() const { return server_.get(); }

 private:
  // Runs fn on a live connection (connecting first when needed); a failed
  // call leaves the connection to be replaced by the next one.
  template <typename F>
  auto with_connection(const char* op, F fn);
  void wait_locked(const std::vector<std::string>& keys, Milliseconds timeout, const char* op);
  std::vector<Bytes> get_pipelined(const std::vector<std::string>& keys, const char* op);

  std::string host_;
  uint16_t port_;
  TCPStoreOptions options_;
  std::unique_ptr<TCPStoreServer> server_;
  mutable std::mutex mu_;
  std::unique_ptr<TCPClientSocket> conn_;
  wire::Dialect dialect_ = wire::Dialect::kUnknown;
  // What the server said it supports (wire::kFeature*); 0 for torch servers.
  uint64_t features_ = 0;
  bool probe_features_ = true;  // false once the server proved not to be trainrun's
};

}  // namespace trainrun
