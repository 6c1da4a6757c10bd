#pragma once
// The client side of one TCP connection to a store server: connecting with
// exponential backoff and jitter, and sending and receiving whole messages
// before a deadline. Used by TCPStore; knows nothing of the protocol.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

struct addrinfo;

namespace trainrun {

class TCPClientSocket {
 public:
  // Thrown when a deadline passes; callers turn it into a TimeoutError that
  // names the operation.
  struct DeadlinePassed {};
  // Thrown when the server closed the connection.
  struct PeerClosed {};

  TCPClientSocket(int fd, std::string where);
  ~TCPClientSocket();
  TCPClientSocket(const TCPClientSocket&) = delete;
  TCPClientSocket& operator=(const TCPClientSocket&) = delete;

  // Connects, retrying refused or unreachable attempts with exponential
  // backoff (10 ms doubling to 1 s, +-50% jitter) until the deadline; then
  // throws TimeoutError naming host:port and the last error.
  static std::unique_ptr<TCPClientSocket> connect_with_retry(const std::string& host, uint16_t port,
                                                             Deadline deadline);

  void send(const std::vector<uint8_t>& buf, Deadline deadline);
  // Exactly `size` bytes. Spins briefly before sleeping in poll: a store
  // reply usually comes within tens of microseconds, and waking costs more.
  // The spin budget adapts, shrinking while replies keep coming late.
  void recv(void* out, size_t size, Deadline deadline);
  template <typename T>
  T recv_fixed(Deadline deadline) {
    T v;
    recv(&v, sizeof(v), deadline);
    return v;
  }
  // A u64 length and that many bytes.
  Bytes recv_bytes(Deadline deadline);
  const std::string& where() const { return where_; }

 private:
  static int try_connect(const addrinfo* a, Deadline deadline, std::string* error);
  void wait_ready(short events, Deadline deadline);

  int fd_;
  std::string where_;
  int spin_budget_;
};

}  // namespace trainrun
