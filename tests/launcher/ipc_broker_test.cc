// The shared-memory broker's books, with raw socket clients standing in for
// worker processes: leases held and released, a dead holder's leases going
// back to the owner, a dead owner's unclaimed leases dropped, the leak report.
#include "launcher/ipc_broker.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "base/error.h"
#include "gtest/gtest.h"

namespace trainrun {
namespace {

std::string socket_path() {
  return "/tmp/trainrun-ipc-broker-test-" + std::to_string(getpid()) + ".sock";
}

// One worker's connection to the broker.
class Client {
 public:
  Client(const std::string& path, int rank) {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
    send({{"op", "hello"}, {"rank", rank}, {"pid", 1000 + rank}});
  }
  ~Client() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void send(const nlohmann::json& m) {
    const std::string s = m.dump();
    ASSERT_EQ(::send(fd_, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  void send_raw(const std::string& s) { ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL); }
  // The next message within `ms`, or null.
  nlohmann::json receive(int ms = 2000) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return nullptr;
    char buffer[65536];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    if (n <= 0) return nullptr;
    return nlohmann::json::parse(std::string(buffer, static_cast<size_t>(n)));
  }
  nlohmann::json request(const nlohmann::json& m) {
    send(m);
    return receive();
  }

 private:
  int fd_ = -1;
};

// Polls until `done` (the broker serves on its own thread).
template <class F>
bool eventually(F done) {
  for (int i = 0; i < 400; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(IpcBroker, LeaseClaimReleaseTellsTheOwner) {
  IpcBroker broker(socket_path());
  Client owner(broker.socket_path(), 0), consumer(broker.socket_path(), 1);
  owner.send({{"op", "export"}, {"id", "1000:0x10"}, {"bytes", 4096}, {"device", "cuda:0"}});
  nlohmann::json ok = owner.request({{"op", "lease"}, {"id", "1000:0x10"}, {"lease", "L1"}});
  ASSERT_FALSE(ok.is_null());
  EXPECT_EQ(ok["op"], "ok");
  consumer.send({{"op", "claim"}, {"lease", "L1"}});
  ASSERT_TRUE(eventually([&] {
    auto l = broker.outstanding_leases();
    return l.size() == 1 && l[0].holder_rank == 1;
  }));
  EXPECT_EQ(broker.outstanding_leases()[0].owner_rank, 0);
  EXPECT_EQ(broker.outstanding_leases()[0].bytes, 4096);
  consumer.send({{"op", "release"}, {"lease", "L1"}});
  nlohmann::json released = owner.receive();
  ASSERT_FALSE(released.is_null());
  EXPECT_EQ(released["op"], "released");
  EXPECT_EQ(released["id"], "1000:0x10");
  EXPECT_TRUE(broker.outstanding_leases().empty());
  EXPECT_EQ(broker.leak_report(), "");
}

TEST(IpcBroker, TwoLeasesReleaseOnlyAfterTheLast) {
  IpcBroker broker(socket_path());
  Client owner(broker.socket_path(), 0), a(broker.socket_path(), 1), b(broker.socket_path(), 2);
  owner.send({{"op", "export"}, {"id", "E"}, {"bytes", 1}, {"device", "cuda:0"}});
  ASSERT_EQ(owner.request({{"op", "lease"}, {"id", "E"}, {"lease", "La"}})["op"], "ok");
  ASSERT_EQ(owner.request({{"op", "lease"}, {"id", "E"}, {"lease", "Lb"}})["op"], "ok");
  a.send({{"op", "claim"}, {"lease", "La"}});
  b.send({{"op", "claim"}, {"lease", "Lb"}});
  a.send({{"op", "release"}, {"lease", "La"}});
  nlohmann::json first = owner.receive();
  ASSERT_FALSE(first.is_null());
  EXPECT_EQ(first["lease"], "La");
  EXPECT_EQ(first["leases"], 1);  // b still holds it
  a.send({{"op", "release"}, {"lease", "La"}});  // twice: the second is a no-op
  EXPECT_TRUE(owner.receive(200).is_null());
  b.send({{"op", "release"}, {"lease", "Lb"}});
  nlohmann::json last = owner.receive();
  ASSERT_FALSE(last.is_null());
  EXPECT_EQ(last["lease"], "Lb");
  EXPECT_EQ(last["leases"], 0);
  EXPECT_EQ(broker.stats().exports_live, 1);  // not unexported: the owner's tensor lives
  owner.send({{"op", "unexport"}, {"id", "E"}});
  ASSERT_TRUE(eventually([&] { return broker.stats().exports_live == 0; }));
}

TEST(IpcBroker, ADeadHolderReleasesItsLeases) {
  IpcBroker broker(socket_path());
  Client owner(broker.socket_path(), 0);
  Client consumer(broker.socket_path(), 3);
  owner.send({{"op", "export"}, {"id", "E"}, {"bytes", 1 << 20}, {"device", "cuda:0"}});
  ASSERT_EQ(owner.request({{"op", "lease"}, {"id", "E"}, {"lease", "L"}})["op"], "ok");
  consumer.send({{"op", "claim"}, {"lease", "L"}});
  ASSERT_TRUE(eventually([&] { return broker.outstanding_leases().size() == 1 &&
                                      broker.outstanding_leases()[0].holder_rank == 3; }));
  consumer.close();  // as the kernel does for a process killed with SIGKILL
  nlohmann::json released = owner.receive();
  ASSERT_FALSE(released.is_null());
  EXPECT_EQ(released["op"], "released");
  EXPECT_EQ(broker.stats().leases_released_by_death, 1);
  EXPECT_TRUE(broker.outstanding_leases().empty());
  const std::string report = broker.leak_report();
  EXPECT_NE(report.find("rank 3 (pid 1003) exited still using 1.00 MiB of cuda:0 owned by rank 0 (pid 1000)"),
            std::string::npos)
      << report;
}

TEST(IpcBroker, ADeadOwnerDropsUnclaimedLeasesAndKeepsClaimedOnes) {
  IpcBroker broker(socket_path());
  auto owner = std::make_unique<Client>(broker.socket_path(), 0);
  Client consumer(broker.socket_path(), 1);
  owner->send({{"op", "export"}, {"id", "E"}, {"bytes", 512}, {"device", "cuda:1"}});
  ASSERT_EQ(owner->request({{"op", "lease"}, {"id", "E"}, {"lease", "claimed"}})["op"], "ok");
  ASSERT_EQ(owner->request({{"op", "lease"}, {"id", "E"}, {"lease", "in-flight"}})["op"], "ok");
  consumer.send({{"op", "claim"}, {"lease", "claimed"}});
  ASSERT_TRUE(eventually([&] {
    for (const IpcLeaseInfo& l : broker.outstanding_leases())
      if (l.lease == "claimed") return l.holder_rank == 1;
    return false;
  }));
  owner.reset();
  ASSERT_TRUE(eventually([&] { return broker.outstanding_leases().size() == 1; }));
  EXPECT_EQ(broker.outstanding_leases()[0].lease, "claimed");
  const std::string report = broker.leak_report();
  EXPECT_NE(report.find("rank 0 (pid 1000) exited with 512 bytes of cuda:1 it sent"), std::string::npos) << report;
  EXPECT_NE(report.find("never opened by the receiver"), std::string::npos) << report;
  EXPECT_NE(report.find("512 bytes of cuda:1 owned by rank 0 (pid 1000), leased by rank 1 (pid 1001)"),
            std::string::npos)
      << report;
  consumer.send({{"op", "release"}, {"lease", "claimed"}});
  ASSERT_TRUE(eventually([&] { return broker.stats().exports_live == 0; }));
}

TEST(IpcBroker, LeakReportNamesALeaseNeverOpened) {
  IpcBroker broker(socket_path());
  Client owner(broker.socket_path(), 2);
  owner.send({{"op", "export"}, {"id", "E"}, {"bytes", 3 << 20}, {"device", "cuda:0"}});
  ASSERT_EQ(owner.request({{"op", "lease"}, {"id", "E"}, {"lease", "L"}})["op"], "ok");
  const std::string report = broker.leak_report();
  EXPECT_NE(report.find("3.00 MiB of cuda:0 owned by rank 2 (pid 1002), sent but never opened"), std::string::npos)
      << report;
  nlohmann::json r = owner.request({{"op", "report"}});
  ASSERT_EQ(r["op"], "report");
  ASSERT_EQ(r["leases"].size(), 1u);
  EXPECT_EQ(r["leases"][0]["owner_rank"], 2);
  EXPECT_EQ(r["leases"][0]["claimed"], false);
  EXPECT_EQ(r["exports"][0]["leases"], 1);
}

TEST(IpcBroker, BadMessagesAreAnsweredAndTheConnectionStays) {
  IpcBroker broker(socket_path());
  Client c(broker.socket_path(), 0);
  c.send_raw("not json");
  nlohmann::json e = c.receive();
  ASSERT_FALSE(e.is_null());
  EXPECT_EQ(e["op"], "error");
  EXPECT_NE(std::string(e["message"]).find("not a JSON object"), std::string::npos);
  e = c.request({{"op", "lease"}, {"id", "nobody's"}, {"lease", "L"}});
  EXPECT_EQ(e["op"], "error");
  EXPECT_NE(std::string(e["message"]).find("has not exported"), std::string::npos);
  e = c.request({{"op", "frobnicate"}});
  EXPECT_NE(std::string(e["message"]).find("unknown op 'frobnicate'"), std::string::npos);
  e = c.request({{"op", "claim"}});  // a field missing: named by the JSON library
  EXPECT_EQ(e["op"], "error");
  EXPECT_EQ(c.request({{"op", "report"}})["op"], "report");  // still served
}

TEST(IpcBroker, RefusesATooLongSocketPath) {
  EXPECT_THROW(IpcBroker(std::string(200, 'x')), ValueError);
}

}  // namespace
}  // namespace trainrun
