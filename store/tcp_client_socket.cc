#include "store/tcp_client_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "base/error.h"

namespace trainrun {
namespace {

// At most this many non-blocking reads are tried before poll() (each a
// syscall of ~0.5 us).
constexpr int kMaxRecvSpins = 100;

}  // namespace

TCPClientSocket::TCPClientSocket(int fd, std::string where)
    : fd_(fd), where_(std::move(where)), spin_budget_(kMaxRecvSpins) {}

TCPClientSocket::~TCPClientSocket() { ::close(fd_); }

std::unique_ptr<TCPClientSocket> TCPClientSocket::connect_with_retry(const std::string& host, uint16_t port, Deadline deadline) {
  const std::string where = fmt::format("{}:{}", host, port);
  std::mt19937 rng(std::random_device{}());
  double backoff_ms = 10;
  std::string last_error = "no address";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* addrs = nullptr;
    int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs);
    if (gai != 0) {
      last_error = gai_strerror(gai);  // DNS may come up later (Kubernetes): keep trying
    } else {
      for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
        int fd = try_connect(a, deadline, &last_error);
        if (fd >= 0) {
          freeaddrinfo(addrs);
          return std::make_unique<TCPClientSocket>(fd, where);
        }
      }
      freeaddrinfo(addrs);
    }
    if (Clock::now() >= deadline) break;
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    auto sleep = Milliseconds(static_cast<int64_t>(backoff_ms * jitter(rng)));
    std::this_thread::sleep_for(std::min<Milliseconds>(sleep, Milliseconds(ms_left(deadline))));
    backoff_ms = std::min(backoff_ms * 2, 1000.0);
    if (Clock::now() >= deadline) break;
  }
  throw StoreTimeoutError(fmt::format("TCPStore: could not connect to {} before the timeout (last error: {})", where,
                                 last_error));
}

void TCPClientSocket::send(const std::vector<uint8_t>& buf, Deadline deadline) {
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t n = ::send(fd_, buf.data() + off, buf.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_ready(POLLOUT, deadline);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      throw PeerClosed{};
    } else {
      throw DistBackendError(fmt::format("TCPStore {}: send failed: {}", where_, std::strerror(errno)));
    }
  }
}

void TCPClientSocket::recv(void* out, size_t size, Deadline deadline) {
  auto* p = static_cast<uint8_t*>(out);
  size_t off = 0;
  int spins = 0;
  while (off < size) {
    ssize_t n = ::recv(fd_, p + off, size - off, 0);
    if (n > 0) {
      if (spins > 0 && spins <= spin_budget_) spin_budget_ = std::min(kMaxRecvSpins, spin_budget_ * 2 + 1);
      off += static_cast<size_t>(n);
    } else if (n == 0) {
      throw PeerClosed{};
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // A store reply usually comes within tens of microseconds: try again
      // briefly before sleeping in poll, whose wake-up costs more than
      // that. The budget adapts: it shrinks while replies keep coming too
      // late (a busy server, or more processes than cores, where spinning
      // only steals CPU from others) and grows back when spinning pays.
      if (spins++ < spin_budget_) continue;
      spin_budget_ /= 2;
      wait_ready(POLLIN, deadline);
      continue;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == ECONNRESET) {
      throw PeerClosed{};
    } else {
      throw DistBackendError(fmt::format("TCPStore {}: recv failed: {}", where_, std::strerror(errno)));
    }
  }
}

Bytes TCPClientSocket::recv_bytes(Deadline deadline) {
  uint64_t n = recv_fixed<uint64_t>(deadline);
  TR_CHECK(n <= (uint64_t(1) << 40), DistBackendError, "TCPStore {}: the server sent a value of {} bytes", where_, n);
  Bytes b(n);
  if (n > 0) recv(b.data(), n, deadline);
  return b;
}

int TCPClientSocket::try_connect(const addrinfo* a, Deadline deadline, std::string* error) {
  int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::strerror(errno);
    return -1;
  }
  int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd pfd{fd, POLLOUT, 0};
    int ready = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(ms_left(deadline), 5000)));
    int err = 0;
    socklen_t len = sizeof(err);
    if (ready == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      rc = 0;
    } else {
      errno = ready == 0 ? ETIMEDOUT : (err != 0 ? err : errno);
      rc = -1;
    }
  }
  if (rc != 0) {
    *error = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

void TCPClientSocket::wait_ready(short events, Deadline deadline) {
  for (;;) {
    int64_t left = ms_left(deadline);
    if (left <= 0) throw DeadlinePassed{};
    pollfd pfd{fd_, events, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (rc > 0) return;
    if (rc < 0 && errno != EINTR)
      throw DistBackendError(fmt::format("TCPStore {}: poll failed: {}", where_, std::strerror(errno)));
  }
}

}  // namespace trainrun
