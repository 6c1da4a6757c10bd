#include "store/tcp_store_server.h"

#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "base/log.h"
#include "store/byte_buffer.h"
#include "store/key_value_table.h"
#include "store/store_auth.h"

namespace trainrun {
namespace {

constexpr size_t kReadChunk = 64 << 10;
// Bytes a client may send behind a parked WAIT before we stop reading from it.
constexpr size_t kMaxBytesBehindWait = 64 << 10;
// WAITs one connection may have parked (a torch 1.13 client leaves one per timeout).
constexpr size_t kMaxParkedWaitsPerConnection = 1024;
// How long the loop polls without sleeping after the last request.
constexpr uint64_t kSpinAfterRequestNs = 50'000;
// Replies queued for a client that does not read before we stop reading from it.
constexpr size_t kMaxPendingWriteBytes = 64 << 20;

std::string peer_name(const uv_tcp_t* tcp) {
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown peer";
  char host[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    uv_ip6_name(a, host, sizeof(host));
    return fmt::format("[{}]:{}", host, ntohs(a->sin6_port));
  }
  auto* a = reinterpret_cast<sockaddr_in*>(&addr);
  uv_ip4_name(a, host, sizeof(host));
  return fmt::format("{}:{}", host, ntohs(a->sin_port));
}

void ignore_sigpipe_once() {
  // libuv writes with write(2): a peer that vanished would raise SIGPIPE and
  // kill the process. Ignore it unless the application installed a handler.
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  });
}

}  // namespace

struct Connection;

// A WAIT whose keys are not all there yet, registered under one missing key.
struct ParkedWait {
  Connection* conn;
  std::vector<std::string> keys;
  std::string waiting_on;
};

struct Connection {
  uv_tcp_t tcp;
  TCPStoreServer::Impl* server = nullptr;
  std::string peer;
  wire::Dialect dialect = wire::Dialect::kUnknown;
  bool authenticated = false;
  bool seen_request = false;
  std::vector<uint8_t> challenge;  // our nonce, after AUTH_HELLO
  ByteBuffer in;
  uint64_t need = 0;  // parse again once this many bytes are buffered
  // Parked WAITs. On a modern connection requests behind one wait for it
  // (CANCEL_WAIT excepted), which lets trainrun clients send WAIT and GET
  // together; torch clients send nothing else meanwhile. On a torch 1.13
  // connection they are served meanwhile, as 1.13's server does: its client
  // leaves a WAIT parked when it times out, and goes on.
  std::vector<std::unique_ptr<ParkedWait>> waits;
  bool reading = false, paused_for_writes = false, paused_behind_wait = false;
  bool closing = false;
  std::vector<uint8_t> out;  // replies not yet handed to libuv
};

namespace {
struct WriteRequest {
  uv_write_t req;
  std::vector<uint8_t> data;
  Connection* conn;
};
}  // namespace

struct TCPStoreServer::Impl {
  Options options;
  uv_loop_t loop{};
  uv_tcp_t listener{};
  uv_async_t stop_async{};
  // Adaptive polling: for a short while after a request the loop polls
  // without sleeping, because the next request of a busy client usually
  // follows within microseconds and waking a sleeping thread costs more.
  uv_idle_t spin{};
  uint64_t last_request_ns = 0;
  int64_t spin_core_limit = std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::thread thread;
  uint16_t port = 0;

  KeyValueTable table;
  std::unordered_map<std::string, std::vector<ParkedWait*>> waiters;  // missing key -> waits parked on it
  std::unordered_set<Connection*> connections;
  std::vector<Connection*> woken;  // waits that completed: resumed after the current callback

  std::atomic<int64_t> n_connections{0}, n_keys{0}, n_parked{0};

  void log(const std::string& line) {
    if (options.log)
      options.log(line);
    else
      log_line("store", line);
  }

  // ---- connections -------------------------------------------------------

  static void on_connection(uv_stream_t* listener, int status) {
    Impl* self = static_cast<Impl*>(listener->data);
    if (status < 0) {
      self->log(fmt::format("accept failed: {}", uv_strerror(status)));
      return;
    }
    auto* conn = new Connection();
    conn->server = self;
    uv_tcp_init(&self->loop, &conn->tcp);
    conn->tcp.data = conn;
    if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&conn->tcp)) != 0) {
      uv_close(reinterpret_cast<uv_handle_t*>(&conn->tcp), [](uv_handle_t* h) { delete static_cast<Connection*>(h->data); });
      return;
    }
    uv_tcp_nodelay(&conn->tcp, 1);
    conn->peer = peer_name(&conn->tcp);
    self->connections.insert(conn);
    self->n_connections++;
    self->update_reading(conn);
  }

  void update_reading(Connection* conn) {
    bool want = !conn->closing && !conn->paused_for_writes && !conn->paused_behind_wait;
    if (want == conn->reading) return;
    auto* stream = reinterpret_cast<uv_stream_t*>(&conn->tcp);
    if (want)
      uv_read_start(stream, on_alloc, on_read);
    else
      uv_read_stop(stream);
    conn->reading = want;
  }

  static void on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
    auto* conn = static_cast<Connection*>(handle->data);
    buf->base = reinterpret_cast<char*>(conn->in.tail(kReadChunk));
    buf->len = kReadChunk;
  }

  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
    auto* conn = static_cast<Connection*>(stream->data);
    Impl* self = conn->server;
    if (nread < 0) {
      self->close(conn, nread == UV_EOF ? "" : fmt::format("read failed: {}", uv_strerror(static_cast<int>(nread))));
    } else if (nread > 0) {
      self->keep_spinning();
      conn->in.commit(static_cast<size_t>(nread));
      self->process(conn);
      self->flush(conn);
    }
    self->resume_woken();
  }

  void close(Connection* conn, const std::string& reason) {
    if (conn->closing) return;
    if (!reason.empty()) log(fmt::format("closing the connection from {}: {}", conn->peer, reason));
    cancel_waits(conn);
    conn->closing = true;
    uv_close(reinterpret_cast<uv_handle_t*>(&conn->tcp), [](uv_handle_t* h) {
      auto* c = static_cast<Connection*>(h->data);
      c->server->connections.erase(c);
      c->server->n_connections--;
      delete c;
    });
  }

  // ---- requests ----------------------------------------------------------

  void process(Connection* conn) {
    process_requests(conn);
    update_reading(conn);
  }

  void process_requests(Connection* conn) {
    while (!conn->closing) {
      const uint8_t* data = conn->in.data();
      size_t avail = conn->in.size();
      if (!conn->waits.empty() && conn->dialect == wire::Dialect::kModern) {
        // Ordered waits: only CANCEL_WAIT may overtake a parked WAIT.
        if (avail > 0 && data[0] == static_cast<uint8_t>(wire::Query::kCancelWait)) {
          conn->in.consume(1);
          cancel_waits(conn);
          wire::Encoder(&conn->out).u8(wire::kWaitCanceled);
          continue;
        }
        conn->paused_behind_wait = avail > kMaxBytesBehindWait;
        return;
      }
      conn->paused_behind_wait = false;
      if (avail == 0 || avail < conn->need) return;
      if (conn->dialect == wire::Dialect::kUnknown) {
        std::optional<wire::Dialect> d = wire::detect_dialect(data, avail);
        if (!d) return;
        conn->dialect = *d;
        if (options.auth_token && *d == wire::Dialect::kLegacy113) {
          close(conn, "refused a torch 1.13 client: this server requires authentication (" +
                          std::string(kStoreTokenEnv) + "), which only trainrun clients can do");
          return;
        }
      }
      wire::Request req;
      wire::ParseResult r = wire::parse_request(data, avail, conn->dialect, options.limits, &req);
      if (r.status == wire::ParseStatus::kNeedMore) {
        conn->need = r.needed;
        return;
      }
      if (r.status == wire::ParseStatus::kInvalid) {
        if (!conn->seen_request && data[0] == 0x00)
          close(conn, fmt::format("the first request is neither VALIDATE with the magic 0x{:08x} nor a torch 1.13 "
                                  "request ({})", wire::kValidateMagic, r.error));
        else
          close(conn, fmt::format("malformed request ({} protocol): {}", wire::dialect_name(conn->dialect), r.error));
        return;
      }
      conn->seen_request = true;
      conn->need = 0;
      conn->in.consume(r.consumed);
      try {
        handle(conn, req);
      } catch (const Error& e) {
        close(conn, fmt::format("{} failed: {}", wire::query_name(req.type), e.what()));
      }
      n_keys.store(table.size());
    }
  }

  void handle(Connection* conn, const wire::Request& req) {
    using wire::Query;
    wire::Encoder reply(&conn->out);
    const bool auth_step = req.type == Query::kValidate || req.type == Query::kPing || req.type == Query::kFeatures ||
                           req.type == Query::kAuthHello || req.type == Query::kAuthProof;
    if (options.auth_token && !conn->authenticated && !auth_step) {
      close(conn, fmt::format("refused {} before authentication: this server requires a token ({}); PyTorch clients "
                              "cannot authenticate",
                              wire::query_name(req.type), kStoreTokenEnv));
      return;
    }
    switch (req.type) {
      case Query::kValidate:
        if (req.word != wire::kValidateMagic) close(conn, fmt::format("invalid VALIDATE magic 0x{:08x}", req.word));
        break;
      case Query::kPing:
        reply.u32(req.word);
        break;
      case Query::kFeatures:
        reply.u64(wire::kFeatureOrderedWaits);
        break;
      case Query::kSet:
        if (table.set(req.keys[0], req.values[0])) key_created(req.keys[0]);
        break;
      case Query::kAppend:
        if (table.append(req.keys[0], req.values[0])) key_created(req.keys[0]);
        break;
      case Query::kCompareSet: {
        bool created = false;
        reply.bytes(table.compare_set(req.keys[0], req.values[0], req.values[1], &created));
        if (created) key_created(req.keys[0]);
        break;
      }
      case Query::kGet: {
        const Bytes* v = table.find(req.keys[0]);
        if (v == nullptr) {
          close(conn, fmt::format("GET of missing key '{}' (clients WAIT for a key before they GET it)", req.keys[0]));
          return;
        }
        reply.bytes(*v);
        break;
      }
      case Query::kAdd: {
        bool created = false;
        reply.i64(table.add(req.keys[0], req.delta, &created));
        if (created) key_created(req.keys[0]);
        break;
      }
      case Query::kCheck:
        reply.u8(table.contains_all(req.keys) ? wire::kCheckReady : wire::kCheckNotReady);
        break;
      case Query::kWait:
        if (table.contains_all(req.keys)) {
          reply.u8(wire::kStopWaiting);
        } else if (conn->waits.size() >= kMaxParkedWaitsPerConnection) {
          close(conn, fmt::format("more than {} WAITs parked on one connection", kMaxParkedWaitsPerConnection));
        } else {
          park(conn, req.keys);
        }
        break;
      case Query::kGetNumKeys:
        reply.i64(table.size());
        break;
      case Query::kDeleteKey:
        reply.i64(table.erase(req.keys[0]) ? 1 : 0);
        break;
      case Query::kMultiGet: {
        if (auto missing = table.first_missing(req.keys)) {
          close(conn, fmt::format("MULTI_GET of missing key '{}' (clients WAIT for keys before they GET them)", *missing));
          return;
        }
        for (const std::string& k : req.keys) reply.bytes(*table.find(k));
        break;
      }
      case Query::kMultiSet:
        for (size_t i = 0; i < req.keys.size(); ++i)
          if (table.set(req.keys[i], req.values[i])) key_created(req.keys[i]);
        break;
      case Query::kCancelWait:
        // Always WAIT_CANCELED, even when the wait was answered just before.
        cancel_waits(conn);
        reply.u8(wire::kWaitCanceled);
        break;
      case Query::kAuthHello: {
        if (!options.auth_token) {
          close(conn, fmt::format("the client wants to authenticate but this server has no token ({} unset)",
                                  kStoreTokenEnv));
          return;
        }
        conn->challenge = random_nonce();
        reply.raw(conn->challenge.data(), conn->challenge.size());
        std::vector<uint8_t> proof = auth_mac(*options.auth_token, "server", req.blob);
        reply.raw(proof.data(), proof.size());
        break;
      }
      case Query::kAuthProof: {
        if (conn->challenge.empty()) {
          close(conn, "AUTH_PROOF before AUTH_HELLO");
          return;
        }
        if (!macs_equal(req.blob, auth_mac(*options.auth_token, "client", conn->challenge))) {
          close(conn, "authentication failed: the client's token differs from the server's");
          return;
        }
        conn->authenticated = true;
        reply.u8(wire::kAuthOk);
        break;
      }
    }
  }

  // ---- waiting -----------------------------------------------------------

  void park(Connection* conn, const std::vector<std::string>& keys) {
    auto wait = std::make_unique<ParkedWait>(ParkedWait{conn, keys, *table.first_missing(keys)});
    waiters[wait->waiting_on].push_back(wait.get());
    conn->waits.push_back(std::move(wait));
    n_parked++;
  }

  void unregister(ParkedWait* wait) {
    auto it = waiters.find(wait->waiting_on);
    if (it == waiters.end()) return;
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), wait), list.end());
    if (list.empty()) waiters.erase(it);
  }

  void cancel_waits(Connection* conn) {
    for (auto& wait : conn->waits) unregister(wait.get());
    n_parked -= static_cast<int64_t>(conn->waits.size());
    conn->waits.clear();
  }

  // A key now exists: each wait parked on it either moves on to its next
  // missing key or is answered with STOP_WAITING.
  void key_created(const std::string& key) {
    auto it = waiters.find(key);
    if (it == waiters.end()) return;
    std::vector<ParkedWait*> parked = std::move(it->second);
    waiters.erase(it);
    for (ParkedWait* wait : parked) {
      if (auto missing = table.first_missing(wait->keys)) {
        wait->waiting_on = *missing;
        waiters[*missing].push_back(wait);
        continue;
      }
      Connection* conn = wait->conn;
      wire::Encoder(&conn->out).u8(wire::kStopWaiting);
      auto& waits = conn->waits;
      waits.erase(std::find_if(waits.begin(), waits.end(), [&](const auto& w) { return w.get() == wait; }));
      n_parked--;
      woken.push_back(conn);
    }
  }

  // Sends the STOP_WAITING replies of waits that completed, and serves the
  // requests that were held behind them.
  void resume_woken() {
    while (!woken.empty()) {
      std::vector<Connection*> batch;
      batch.swap(woken);
      for (Connection* conn : batch) {
        if (conn->closing) continue;
        process(conn);
        flush(conn);
      }
    }
  }

  // ---- writing -----------------------------------------------------------

  void flush(Connection* conn) {
    if (conn->closing || conn->out.empty()) return;
    auto* w = new WriteRequest();
    w->conn = conn;
    w->data.swap(conn->out);
    uv_buf_t buf = uv_buf_init(reinterpret_cast<char*>(w->data.data()), static_cast<unsigned>(w->data.size()));
    auto* stream = reinterpret_cast<uv_stream_t*>(&conn->tcp);
    int rc = uv_write(&w->req, stream, &buf, 1, on_write);
    if (rc != 0) {
      delete w;
      close(conn, fmt::format("write failed: {}", uv_strerror(rc)));
      return;
    }
    if (uv_stream_get_write_queue_size(stream) > kMaxPendingWriteBytes) {
      conn->paused_for_writes = true;  // the client is not reading its replies
      update_reading(conn);
    }
  }

  static void on_write(uv_write_t* req, int status) {
    auto* w = reinterpret_cast<WriteRequest*>(req);
    Connection* conn = w->conn;
    delete w;
    Impl* self = conn->server;
    if (status < 0) {
      if (status != UV_ECANCELED) self->close(conn, fmt::format("write failed: {}", uv_strerror(status)));
      return;
    }
    auto* stream = reinterpret_cast<uv_stream_t*>(&conn->tcp);
    if (conn->paused_for_writes && uv_stream_get_write_queue_size(stream) < kMaxPendingWriteBytes / 2) {
      conn->paused_for_writes = false;
      self->update_reading(conn);
    }
  }

  // ---- adaptive polling --------------------------------------------------

  // Spinning pays only while each client and the loop can have a core of
  // their own; with more connections than that it takes CPU from clients.
  void keep_spinning() {
    last_request_ns = uv_hrtime();
    if (n_connections.load() >= spin_core_limit) return;
    if (!uv_is_active(reinterpret_cast<uv_handle_t*>(&spin))) uv_idle_start(&spin, on_spin);
  }

  static void on_spin(uv_idle_t* idle) {
    Impl* self = static_cast<Impl*>(idle->data);
    if (uv_hrtime() - self->last_request_ns > kSpinAfterRequestNs) uv_idle_stop(idle);
  }

  // ---- lifecycle ---------------------------------------------------------

  static void on_stop(uv_async_t* async) {
    Impl* self = static_cast<Impl*>(async->data);
    std::vector<Connection*> all(self->connections.begin(), self->connections.end());
    for (Connection* c : all) self->close(c, "");
    uv_close(reinterpret_cast<uv_handle_t*>(&self->listener), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&self->stop_async), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&self->spin), nullptr);
  }

  // Listens on the first of host:port's addresses that takes it; a libuv error code (0: listening).
  int bind_and_listen(const std::string& where) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* addrs = nullptr;
    const std::string port_text = std::to_string(options.port);
    const int gai = getaddrinfo(options.host.c_str(), port_text.c_str(), &hints, &addrs);
    if (gai != 0) {
      close_all_and_drain();
      throw DistBackendError(fmt::format("TCPStoreServer: cannot resolve {}: {}", where, gai_strerror(gai)));
    }
    int rc = UV_EADDRNOTAVAIL;
    for (addrinfo* a = addrs; a != nullptr; a = a->ai_next) {
      rc = uv_tcp_bind(&listener, a->ai_addr, 0);
      if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener), options.backlog, Impl::on_connection);
      if (rc == 0) break;
      // A failed bind leaves the handle unusable: start over with a fresh one.
      uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
      uv_run(&loop, UV_RUN_NOWAIT);
      uv_tcp_init(&loop, &listener);
      listener.data = this;
    }
    freeaddrinfo(addrs);
    return rc;
  }

  // Listens on a socket the caller bound.
  int open_and_listen(int fd) {
    const int rc = uv_tcp_open(&listener, fd);
    return rc != 0 ? rc : uv_listen(reinterpret_cast<uv_stream_t*>(&listener), options.backlog, on_connection);
  }

  // Runs the loop until every handle is closed (used on failed start-up).
  void close_all_and_drain() {
    uv_walk(&loop, [](uv_handle_t* h, void*) { if (!uv_is_closing(h)) uv_close(h, nullptr); }, nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
};

TCPStoreServer::TCPStoreServer(Options options) : impl_(std::make_unique<Impl>()) {
  ignore_sigpipe_once();
  Impl& s = *impl_;
  s.options = std::move(options);
  // A socket the caller bound (PyTorch's master_listen_fd), or host:port bound here.
  const std::string where = s.options.listen_fd ? fmt::format("socket {}", *s.options.listen_fd)
                                                : fmt::format("{}:{}", s.options.host, s.options.port);
  TR_CHECK(!s.options.host.empty(), ValueError,
           "TCPStoreServer: empty host; pass an address to bind (\"0.0.0.0\" or \"::\" for every interface)");
  TR_CHECK(s.options.backlog > 0, ValueError, "TCPStoreServer: backlog must be positive, got {}", s.options.backlog);
  if (s.options.auth_token) TR_CHECK(!s.options.auth_token->empty(), ValueError, "TCPStoreServer: empty auth token");
  uv_loop_init(&s.loop);
  uv_tcp_init(&s.loop, &s.listener);
  s.listener.data = &s;
  const int rc = s.options.listen_fd ? s.open_and_listen(*s.options.listen_fd) : s.bind_and_listen(where);
  if (rc != 0) {
    s.close_all_and_drain();
    throw DistBackendError(fmt::format("TCPStoreServer: cannot listen on {}: {}", where, uv_strerror(rc)));
  }
  sockaddr_storage bound{};
  int len = sizeof(bound);
  uv_tcp_getsockname(&s.listener, reinterpret_cast<sockaddr*>(&bound), &len);
  s.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  uv_async_init(&s.loop, &s.stop_async, Impl::on_stop);
  s.stop_async.data = &s;
  uv_idle_init(&s.loop, &s.spin);
  s.spin.data = &s;
  s.thread = std::thread([&s] { uv_run(&s.loop, UV_RUN_DEFAULT); });
}

TCPStoreServer::~TCPStoreServer() {
  uv_async_send(&impl_->stop_async);
  impl_->thread.join();
  uv_loop_close(&impl_->loop);
}

uint16_t TCPStoreServer::port() const { return impl_->port; }
const std::string& TCPStoreServer::host() const { return impl_->options.host; }
int64_t TCPStoreServer::num_connections() const { return impl_->n_connections.load(); }
int64_t TCPStoreServer::num_keys() const { return impl_->n_keys.load(); }
int64_t TCPStoreServer::num_parked_waits() const { return impl_->n_parked.load(); }

}  // namespace trainrun
