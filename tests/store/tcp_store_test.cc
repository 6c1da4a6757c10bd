// TCPStoreServer and TCPStore together: every operation, waiter wake-ups,
// timeouts, connecting and reconnecting, many processes, and authentication.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "store/store_barrier.h"
#include "store/tcp_store.h"
#include "store/tcp_store_server.h"
#include "tests/store/store_test_util.h"

extern char** environ;

namespace trainrun {
namespace {

using namespace std::chrono_literals;

TCPStoreServer::Options server_options(LogCapture* log = nullptr) {
  TCPStoreServer::Options o;
  o.host = "127.0.0.1";
  if (log) o.log = log->sink();
  return o;
}

TCPStoreOptions client_options(Milliseconds timeout = 5s) {
  TCPStoreOptions o;
  o.timeout = timeout;
  o.auth_token = std::nullopt;
  return o;
}

// A port nobody listens on (briefly bound by a server, then released).
uint16_t free_port() {
  TCPStoreServer probe(server_options());
  return probe.port();
}

TEST(TCPStore, EveryOperationRoundTrips) {
  TCPStoreServer server(server_options());
  TCPStore s("127.0.0.1", server.port(), client_options());
  EXPECT_EQ(s.dialect(), wire::Dialect::kModern);
  EXPECT_TRUE(s.server_orders_waits());
  s.set("k1", std::string("v1"));
  EXPECT_EQ(s.get_string("k1"), "v1");
  EXPECT_EQ(s.add("cnt", 5), 5);
  EXPECT_EQ(s.add("cnt", -2), 3);
  EXPECT_EQ(s.get_string("cnt"), "3");
  EXPECT_TRUE(s.check({"k1", "cnt"}));
  EXPECT_FALSE(s.check({"k1", "nokey"}));
  s.append("k1", to_bytes("+more"));
  EXPECT_EQ(s.get_string("k1"), "v1+more");
  EXPECT_EQ(to_string(s.compare_set("k1", to_bytes("v1+more"), to_bytes("new"))), "new");
  EXPECT_EQ(to_string(s.compare_set("k1", to_bytes("WRONG"), to_bytes("x"))), "new");
  EXPECT_EQ(to_string(s.compare_set("fresh", {}, to_bytes("init"))), "init");
  EXPECT_EQ(to_string(s.compare_set("missing", to_bytes("exp"), to_bytes("des"))), "exp");
  s.multi_set({"a", "b"}, {to_bytes("1"), to_bytes("22")});
  auto values = s.multi_get({"b", "a"});
  EXPECT_EQ(to_string(values[0]), "22");
  EXPECT_EQ(to_string(values[1]), "1");
  EXPECT_EQ(s.num_keys(), 5);  // k1 cnt fresh a b
  EXPECT_TRUE(s.delete_key("a"));
  EXPECT_FALSE(s.delete_key("a"));
  EXPECT_EQ(s.num_keys(), 4);
  std::string big(70000, 'x');
  s.set(std::string(300, 'k'), big);
  EXPECT_EQ(s.get_string(std::string(300, 'k')), big);
  EXPECT_EQ(server.num_keys(), 5);
}

// PyTorch's master_listen_fd: the master serves on a socket bound by someone else (and only without libuv,
// as PyTorch's libuv server refuses it).
TEST(TCPStore, MasterListensOnASocketHandedIn) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(addr.sin_port);
  TCPStoreOptions mo = client_options();
  mo.is_master = true;
  mo.master_listen_fd = fd;
  EXPECT_THROW(TCPStore("127.0.0.1", port, mo), NotImplementedError);  // use_libuv (the default)
  mo.use_libuv = false;
  TCPStore master("127.0.0.1", port, mo);
  EXPECT_EQ(master.port(), port);
  TCPStore client("127.0.0.1", port, client_options());
  client.set("k", std::string("v"));
  EXPECT_EQ(master.get_string("k"), "v");
  TCPStoreOptions not_master = client_options();
  not_master.master_listen_fd = fd;
  not_master.use_libuv = false;
  EXPECT_THROW(TCPStore("127.0.0.1", port, not_master), ValueError);
}

TEST(TCPStore, MasterStartsTheServerAndWaitsForWorkers) {
  // Port 0: the master's server picks the port, so no other test can take it
  // first; the master then waits for the workers explicitly.
  TCPStoreOptions mo = client_options();
  mo.is_master = true;
  mo.num_workers = 3;
  mo.wait_for_workers = false;
  TCPStore master("127.0.0.1", 0, mo);
  ASSERT_NE(master.server(), nullptr);
  const uint16_t port = master.port();
  EXPECT_EQ(port, master.server()->port());
  expect_error<TimeoutError>([&] { master.wait_for_workers(50ms); }, {"only 1 of 3 workers"});
  std::vector<std::string> errors(2);
  std::vector<std::thread> workers;
  auto start_worker = [&](int w) {
    workers.emplace_back([&, w] {
      try {
        TCPStoreOptions o = client_options();
        o.num_workers = 3;
        TCPStore s("127.0.0.1", port, o);
        store_barrier(s, "done", 3, 5s);
      } catch (const std::exception& e) {
        errors[w] = e.what();
      }
    });
  };
  // One worker short of the count, the master still waits (both sides of the limit).
  start_worker(0);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (master.add("init/", 0) < 2 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  expect_error<TimeoutError>([&] { master.wait_for_workers(100ms); }, {"only 2 of 3 workers"});
  start_worker(1);
  master.wait_for_workers(5s);
  EXPECT_EQ(master.add("init/", 0), 3);
  store_barrier(master, "done", 3, 5s);
  for (auto& t : workers) t.join();
  EXPECT_EQ(errors, std::vector<std::string>(2));
}

TEST(TCPStore, WaitersWakeOnEveryCreatingOperationFromAnotherClient) {
  TCPStoreServer server(server_options());
  TCPStore waiter("127.0.0.1", server.port(), client_options());
  TCPStore writer("127.0.0.1", server.port(), client_options());
  std::vector<std::function<void()>> creators = {
      [&] { writer.set("k0", std::string("v")); },
      [&] { writer.add("k1", 1); },
      [&] { writer.compare_set("k2", {}, to_bytes("v")); },
      [&] { writer.append("k3", to_bytes("v")); },
      [&] { writer.multi_set({"other", "k4"}, {to_bytes("o"), to_bytes("v")}); },
  };
  for (size_t i = 0; i < creators.size(); ++i) {
    std::string key = "k" + std::to_string(i);
    std::atomic<bool> done{false};
    std::string error;
    std::thread t([&] {
      try {
        // The multi_set case waits for both of its keys.
        waiter.wait(i == 4 ? std::vector<std::string>{key, "other"} : std::vector<std::string>{key});
        done = true;
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    for (int spin = 0; spin < 200 && server.num_parked_waits() == 0; ++spin) std::this_thread::sleep_for(5ms);
    EXPECT_EQ(server.num_parked_waits(), 1) << key;
    EXPECT_FALSE(done.load()) << key;
    creators[i]();
    t.join();
    EXPECT_TRUE(done.load()) << key << ": " << error;
    EXPECT_EQ(server.num_parked_waits(), 0);
  }
}

TEST(TCPStore, GetBlocksUntilAnotherClientSetsTheKey) {
  TCPStoreServer server(server_options());
  TCPStore reader("127.0.0.1", server.port(), client_options());
  TCPStore writer("127.0.0.1", server.port(), client_options());
  std::string got;
  std::vector<Bytes> many;
  std::string error;
  std::thread t([&] {
    try {
      got = reader.get_string("later");               // WAIT and GET in one write
      many = reader.multi_get({"later", "later2"});  // WAIT and MULTI_GET likewise
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  for (int spin = 0; spin < 200 && server.num_parked_waits() == 0; ++spin) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.num_parked_waits(), 1);
  writer.set("later", std::string("value"));
  for (int spin = 0; spin < 200 && server.num_parked_waits() == 0; ++spin) std::this_thread::sleep_for(5ms);
  writer.set("later2", std::string("value2"));
  t.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, "value");
  ASSERT_EQ(many.size(), 2u);
  EXPECT_EQ(to_string(many[1]), "value2");
}

TEST(TCPStore, WaitTimeoutCancelsOnTheWireAndTheStoreStaysUsable) {
  TCPStoreServer server(server_options());
  TCPStore s("127.0.0.1", server.port(), client_options());
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  auto t0 = std::chrono::steady_clock::now();
  expect_error<TimeoutError>([&] { s.wait({"late"}, 100ms); }, {where.c_str(), "100 ms", "late"});
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_EQ(server.num_parked_waits(), 0);
  EXPECT_EQ(server.num_connections(), 1);  // cancelled, not reconnected
  s.set("late", std::string("now"));
  EXPECT_EQ(s.get_string("late"), "now");
  TCPStore short_timeout("127.0.0.1", server.port(), client_options(80ms));
  expect_error<TimeoutError>([&] { short_timeout.get("never"); }, {"get", "never"});
  EXPECT_EQ(short_timeout.get_string("late"), "now");
}

TEST(TCPStore, ConnectRetriesUntilTheServerStartsOrTheTimeout) {
  // The port is free when chosen but another test may take it before the
  // server starts; then try again with another.
  for (int attempt = 0;; ++attempt) {
    const uint16_t port = free_port();
    std::unique_ptr<TCPStoreServer> server;
    std::string bind_error;
    std::thread starter([&] {
      std::this_thread::sleep_for(300ms);
      try {
        TCPStoreServer::Options o = server_options();
        o.port = port;
        server = std::make_unique<TCPStoreServer>(o);
      } catch (const std::exception& e) {
        bind_error = e.what();
      }
    });
    auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<TCPStore> s;
    try {
      s = std::make_unique<TCPStore>("127.0.0.1", port, client_options(2s));
    } catch (const TimeoutError&) {
    }
    starter.join();
    if (!bind_error.empty() && attempt < 3) continue;
    ASSERT_TRUE(bind_error.empty()) << bind_error;
    ASSERT_NE(s, nullptr);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1900ms);  // backoff is capped at 1 s
    s->set("x", std::string("1"));
    EXPECT_EQ(s->get_string("x"), "1");
    break;
  }
  const uint16_t nobody = free_port();
  const std::string where = "127.0.0.1:" + std::to_string(nobody);
  expect_error<TimeoutError>([&] { TCPStore("127.0.0.1", nobody, client_options(200ms)); },
                             {"could not connect", where.c_str()});
}

TEST(TCPStore, ReconnectsAfterTheServerRestarts) {
  auto server = std::make_unique<TCPStoreServer>(server_options());
  const uint16_t port = server->port();
  TCPStore s("127.0.0.1", port, client_options(2s));
  s.set("a", std::string("1"));
  EXPECT_EQ(s.get_string("a"), "1");
  server.reset();
  expect_error<Error>([&] { s.add("n", 1); }, {"127.0.0.1"});
  TCPStoreServer::Options o = server_options();
  o.port = port;
  server = std::make_unique<TCPStoreServer>(o);
  EXPECT_EQ(s.add("n", 1), 1);  // a fresh connection to the new server (whose keys are new too)
  EXPECT_FALSE(s.check({"a"}));
}

TEST(TCPStore, ManyProcessesRendezvous) {
  TCPStoreServer server(server_options());
  const int world = 8;
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    std::string port = std::to_string(server.port()), rank = std::to_string(r), w = std::to_string(world);
    const char* path = "tests/store/store_worker";
    char* argv[] = {const_cast<char*>(path), port.data(), rank.data(), w.data(), nullptr};
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, path, nullptr, nullptr, argv, environ), 0) << "cannot start " << path;
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a worker failed (see its stderr above)";
  }
  TCPStore s("127.0.0.1", server.port(), client_options());
  EXPECT_EQ(s.add("arrived", 0), world);
  EXPECT_EQ(s.get_string("log").size(), 16u);  // "0;".."7;" in some order
  EXPECT_EQ(s.add("init/", 0), world);
}

TEST(TCPStore, AuthenticatesWithAToken) {
  LogCapture log;
  TCPStoreServer::Options o = server_options(&log);
  o.auth_token = "s3cret";
  TCPStoreServer server(o);
  TCPStoreOptions good = client_options();
  good.auth_token = "s3cret";
  TCPStore s("127.0.0.1", server.port(), good);
  s.set("a", std::string("1"));
  EXPECT_EQ(s.get_string("a"), "1");

  TCPStoreOptions wrong = client_options(1s);
  wrong.auth_token = "guess";
  expect_error<DistBackendError>([&] { TCPStore("127.0.0.1", server.port(), wrong); }, {"prove", "token"});

  TCPStoreOptions none = client_options(1s);
  TCPStore plain("127.0.0.1", server.port(), none);  // the handshake passes; the first query is refused
  expect_error<DistBackendError>([&] { plain.add("n", 1); }, {"closed the connection"});
  EXPECT_TRUE(log.wait_for({"refused ADD before authentication", "127.0.0.1:"})) << log.all();

  RawSocket legacy(server.port());
  legacy.send({0x06});  // torch 1.13 GETNUMKEYS
  EXPECT_TRUE(legacy.closed_by_peer());
  EXPECT_TRUE(log.wait_for({"refused a torch 1.13 client"})) << log.all();
  EXPECT_EQ(s.add("n", 1), 1);  // the authenticated client is unaffected

  TCPStoreServer open_server(server_options());
  expect_error<DistBackendError>([&] { TCPStore("127.0.0.1", open_server.port(), good); }, {"authentication"});
}

}  // namespace
}  // namespace trainrun
