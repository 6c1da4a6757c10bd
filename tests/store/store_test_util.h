#pragma once
// Helpers for the store tests: raw sockets for sending exact bytes, and
// a capture of the server's log lines.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/wire_protocol.h"
#include "tests/expect_error.h"

namespace trainrun {

// A plain TCP connection to 127.0.0.1:port for sending exact bytes.
class RawSocket {
 public:
  explicit RawSocket(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~RawSocket() { ::close(fd_); }

  void send(const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  // Up to n bytes, waiting at most timeout_ms for each read.
  std::vector<uint8_t> recv(size_t n, int timeout_ms = 2000) {
    std::vector<uint8_t> out;
    while (out.size() < n) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, timeout_ms) != 1) break;
      uint8_t buf[4096];
      ssize_t got = ::recv(fd_, buf, std::min(sizeof(buf), n - out.size()), 0);
      if (got <= 0) break;
      out.insert(out.end(), buf, buf + got);
    }
    return out;
  }
  // True when the server closed the connection within timeout_ms.
  bool closed_by_peer(int timeout_ms = 2000) {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) != 1) return false;
    uint8_t b;
    return ::recv(fd_, &b, 1, 0) <= 0;
  }

 private:
  int fd_ = -1;
};

// Request bytes in the modern dialect.
inline std::vector<uint8_t> modern(wire::Query q, const std::vector<std::string>& keys = {},
                                   const std::vector<std::string>& values = {}) {
  std::vector<uint8_t> out;
  wire::Encoder e(&out);
  e.u8(static_cast<uint8_t>(q));
  for (const auto& k : keys) e.str(k);
  for (const auto& v : values) e.str(v);
  return out;
}

inline std::vector<uint8_t> handshake(uint32_t nonce = 7) {
  std::vector<uint8_t> out;
  wire::Encoder(&out).u8(0).u32(wire::kValidateMagic).u8(0x0d).u32(nonce);
  return out;
}

// Collects the server's log lines.
class LogCapture {
 public:
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    };
  }
  // Waits up to 2 s for a line containing every fragment.
  bool wait_for(std::initializer_list<const char*> fragments) {
    for (int i = 0; i < 200; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& line : lines_) {
          bool all = true;
          for (const char* f : fragments) all = all && line.find(f) != std::string::npos;
          if (all) return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace trainrun
