#include "launcher/ipc_broker.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace trainrun {
namespace {

constexpr size_t kMaxMessage = 64 * 1024;

std::string format_bytes(int64_t n) {
  if (n >= (int64_t(1) << 30)) return fmt::format("{:.2f} GiB", n / double(int64_t(1) << 30));
  if (n >= (int64_t(1) << 20)) return fmt::format("{:.2f} MiB", n / double(int64_t(1) << 20));
  if (n >= 1024) return fmt::format("{:.2f} KiB", n / 1024.0);
  return fmt::format("{} bytes", n);
}

std::string who(int rank, int64_t pid) {
  return rank >= 0 ? fmt::format("rank {} (pid {})", rank, pid) : fmt::format("pid {}", pid);
}

}  // namespace

IpcBroker::IpcBroker(std::string socket_path) : path_(std::move(socket_path)) {
  sockaddr_un addr{};
  TR_CHECK(path_.size() < sizeof(addr.sun_path), ValueError,
           "IpcBroker: socket path '{}' is longer than the {} bytes a Unix socket allows", path_,
           sizeof(addr.sun_path) - 1);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  ::unlink(path_.c_str());  // a stale socket of a job that died
  listen_fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  TR_CHECK(listen_fd_ >= 0, DistBackendError, "IpcBroker: socket: {}", std::strerror(errno));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listen_fd_, 128) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    throw DistBackendError(fmt::format("IpcBroker: cannot listen on '{}': {}", path_, std::strerror(err)));
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { serve(); });
}

IpcBroker::~IpcBroker() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  thread_.join();
  for (auto& [fd, client] : clients_) ::close(fd);
  ::close(listen_fd_);
  ::close(wake_fd_);
  ::unlink(path_.c_str());
}

void IpcBroker::serve() {
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [fd, client] : clients_) fds.push_back({fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    if (fds[1].revents & POLLIN) accept_client();
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents != 0 && !handle(fds[i].fd)) drop_client(fds[i].fd);
  }
}

void IpcBroker::accept_client() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    clients_[fd] = Client{};
    stats_.clients_connected += 1;
    // Non-blocking from here on: one slow owner must not stall the others.
    (void)!::fcntl(fd, F_SETFL, O_NONBLOCK);
  }
}

bool IpcBroker::handle(int fd) {
  std::string buffer(kMaxMessage, '\0');
  const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
  if (n == 0) return false;  // the process closed its end, or died
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  buffer.resize(static_cast<size_t>(n));
  std::string reply;
  try {
    reply = dispatch(fd, buffer);
  } catch (const std::exception& e) {
    reply = nlohmann::json{{"op", "error"}, {"message", e.what()}}.dump();
  }
  if (!reply.empty()) send_to(fd, reply);
  return true;
}

std::string IpcBroker::dispatch(int fd, const std::string& text) {
  const nlohmann::json m = nlohmann::json::parse(text, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("op") || !m["op"].is_string())
    return nlohmann::json{{"op", "error"}, {"message", "not a JSON object with an \"op\": " + text.substr(0, 200)}}
        .dump();
  const std::string op = m["op"];
  std::lock_guard<std::mutex> lock(mu_);
  Client& me = clients_[fd];
  if (op == "hello") {
    me.rank = m.value("rank", -1);
    me.pid = m.value("pid", int64_t{0});
    return "";
  }
  if (op == "export") {
    const std::string id = m.at("id");
    Export& e = exports_[id];
    if (e.owner_fd == -1 && e.leases == 0) stats_.exports_total += 1;
    e.owner_fd = fd;
    e.owner_rank = me.rank;
    e.owner_pid = me.pid;
    e.bytes = m.value("bytes", int64_t{0});
    e.device = m.value("device", std::string("?"));
    e.unexported = false;
    return "";
  }
  if (op == "lease") {
    const std::string id = m.at("id"), lease = m.at("lease");
    auto it = exports_.find(id);
    if (it == exports_.end() || it->second.owner_fd != fd)
      return nlohmann::json{{"op", "error"}, {"lease", lease}, {"message", "lease of '" + id + "', which this process "
                                                                          "has not exported"}}
          .dump();
    if (leases_.count(lease) == 0) {
      leases_[lease] = Lease{id, -1, -1, 0, std::chrono::steady_clock::now()};
      it->second.leases += 1;
      stats_.leases_total += 1;
    }
    return nlohmann::json{{"op", "ok"}, {"lease", lease}}.dump();  // the owner waits for this before sending
  }
  if (op == "claim") {
    const std::string lease = m.at("lease");
    auto it = leases_.find(lease);
    if (it == leases_.end())
      return nlohmann::json{{"op", "error"}, {"lease", lease}, {"message", "claim of unknown lease '" + lease + "'"}}
          .dump();
    it->second.holder_fd = fd;
    it->second.holder_rank = me.rank;
    it->second.holder_pid = me.pid;
    return "";
  }
  if (op == "release") {
    release_lease(m.at("lease"));
    return "";
  }
  if (op == "unexport") {
    auto it = exports_.find(m.at("id"));
    if (it != exports_.end()) {
      if (it->second.leases == 0) {
        exports_.erase(it);
      } else {
        it->second.unexported = true;
      }
    }
    return "";
  }
  if (op == "report") {
    nlohmann::json leases = nlohmann::json::array(), exports = nlohmann::json::array();
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [name, l] : leases_) {
      const Export& e = exports_.at(l.export_id);
      leases.push_back({{"lease", name}, {"id", l.export_id}, {"bytes", e.bytes}, {"device", e.device},
                        {"owner_rank", e.owner_rank}, {"owner_pid", e.owner_pid}, {"holder_rank", l.holder_rank},
                        {"holder_pid", l.holder_pid}, {"claimed", l.holder_fd >= 0},
                        {"age_s", std::chrono::duration<double>(now - l.taken).count()}});
    }
    for (const auto& [id, e] : exports_)
      exports.push_back({{"id", id}, {"bytes", e.bytes}, {"device", e.device}, {"owner_rank", e.owner_rank},
                         {"owner_pid", e.owner_pid}, {"leases", e.leases}, {"owner_alive", e.owner_fd >= 0}});
    return nlohmann::json{{"op", "report"}, {"exports", exports}, {"leases", leases}}.dump();
  }
  return nlohmann::json{{"op", "error"}, {"message", "unknown op '" + op + "'"}}.dump();
}

void IpcBroker::release_lease(const std::string& lease) {
  auto it = leases_.find(lease);
  if (it == leases_.end()) return;  // released twice: the second is a no-op
  auto e = exports_.find(it->second.export_id);
  leases_.erase(it);
  if (e == exports_.end()) return;
  e->second.leases -= 1;
  // The owner gives back one hold on its block per lease.
  if (e->second.owner_fd >= 0)
    send_to(e->second.owner_fd,
            nlohmann::json{{"op", "released"}, {"id", e->first}, {"lease", lease}, {"leases", e->second.leases}}
                .dump());
  if (e->second.leases == 0 && (e->second.unexported || e->second.owner_fd < 0)) exports_.erase(e);
}

void IpcBroker::drop_client(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  // Leases it held go back to their owners; leases it took as an owner and
  // nobody claimed die with it (its memory is gone), and so do its exports
  // nobody leases. Exports others still lease stay listed: owner gone.
  std::vector<std::string> held, unclaimed;
  for (const auto& [name, l] : leases_) {
    if (l.holder_fd == fd) held.push_back(name);
    if (l.holder_fd == -1 && exports_.count(l.export_id) && exports_[l.export_id].owner_fd == fd)
      unclaimed.push_back(name);
  }
  stats_.leases_released_by_death += static_cast<int64_t>(held.size());
  const Client& gone = clients_[fd];
  const auto now = std::chrono::steady_clock::now();
  auto note = [&](std::string line) {
    if (exit_notes_.size() < 100) {
      exit_notes_.push_back(std::move(line));
    } else {
      exit_notes_dropped_ += 1;
    }
  };
  for (const std::string& name : held) {
    const Lease& l = leases_[name];
    const Export& e = exports_[l.export_id];
    note(fmt::format("  {} exited still using {} of {} owned by {} (leased {:.1f} s before)", who(gone.rank, gone.pid),
                     format_bytes(e.bytes), e.device, who(e.owner_rank, e.owner_pid),
                     std::chrono::duration<double>(now - l.taken).count()));
  }
  for (const std::string& name : unclaimed) {
    const Lease& l = leases_[name];
    const Export& e = exports_[l.export_id];
    note(fmt::format("  {} exited with {} of {} it sent {:.1f} s before never opened by the receiver",
                     who(gone.rank, gone.pid), format_bytes(e.bytes), e.device,
                     std::chrono::duration<double>(now - l.taken).count()));
  }
  for (auto& [id, e] : exports_)
    if (e.owner_fd == fd) e.owner_fd = -1;
  for (const std::string& name : held) release_lease(name);
  for (const std::string& name : unclaimed) release_lease(name);
  for (auto it = exports_.begin(); it != exports_.end();) {
    if (it->second.owner_fd == -1 && it->second.leases == 0) {
      it = exports_.erase(it);
    } else {
      ++it;
    }
  }
  clients_.erase(fd);
  ::close(fd);
}

void IpcBroker::send_to(int fd, const std::string& message) {
  // A full socket means an owner that stopped reading: its notice is dropped, not waited for.
  (void)!::send(fd, message.data(), message.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

std::vector<IpcLeaseInfo> IpcBroker::outstanding_leases() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<IpcLeaseInfo> out;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [name, l] : leases_) {
    const Export& e = exports_.at(l.export_id);
    out.push_back(IpcLeaseInfo{name, l.export_id, e.device, e.bytes, e.owner_rank, l.holder_rank, e.owner_pid,
                               l.holder_pid, std::chrono::duration<double>(now - l.taken).count()});
  }
  return out;
}

IpcBrokerStats IpcBroker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  IpcBrokerStats s = stats_;
  s.exports_live = static_cast<int64_t>(exports_.size());
  s.leases_live = static_cast<int64_t>(leases_.size());
  return s;
}

std::string IpcBroker::leak_report() const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& line : exit_notes_) out += line + "\n";
    if (exit_notes_dropped_ > 0) out += fmt::format("  ... and {} more\n", exit_notes_dropped_);
  }
  for (const IpcLeaseInfo& l : outstanding_leases()) {
    out += fmt::format("  {} of {} owned by {}, {} for {:.1f} s\n", format_bytes(l.bytes), l.device,
                       who(l.owner_rank, l.owner_pid),
                       l.holder_rank >= 0 || l.holder_pid != 0 ? "leased by " + who(l.holder_rank, l.holder_pid)
                                                               : std::string("sent but never opened"),
                       l.age_s);
  }
  return out;
}

}  // namespace trainrun
