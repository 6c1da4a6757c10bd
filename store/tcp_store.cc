#include "store/tcp_store.h"

#include <unistd.h>

#include <thread>

#include "base/error.h"
#include "store/store_auth.h"
#include "store/tcp_client_socket.h"

namespace trainrun {
namespace {

using Connection = TCPClientSocket;
using DeadlinePassed = TCPClientSocket::DeadlinePassed;
using PeerClosed = TCPClientSocket::PeerClosed;
using wire::Dialect;
using wire::Query;

// torch's client puts every user key under "/"; its worker counter is not.
constexpr const char* kKeyPrefix = "/";
constexpr const char* kInitKey = "init/";

std::string wire_key(const std::string& key) { return kKeyPrefix + key; }
std::vector<std::string> wire_keys(const std::vector<std::string>& keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const std::string& k : keys) out.push_back(wire_key(k));
  return out;
}

}  // namespace


namespace {

// Builds one request in the connection's dialect.
class RequestBuilder {
 public:
  RequestBuilder(Dialect dialect, Query q) : enc_(&buf_) {
    std::optional<uint8_t> byte = wire::query_byte(q, dialect);
    TR_CHECK(byte.has_value(), NotImplementedError, "TCPStore: the {} protocol has no {}", wire::dialect_name(dialect),
             wire::query_name(q));
    enc_.u8(*byte);
  }
  wire::Encoder& enc() { return enc_; }
  std::vector<uint8_t>& buffer() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
  wire::Encoder enc_;
};

void append_keys(wire::Encoder& e, const std::vector<std::string>& keys) {
  e.u64(keys.size());
  for (const std::string& k : keys) e.str(k);
}

// The outcome of opening a connection with the modern handshake.
struct Handshake {
  std::unique_ptr<TCPClientSocket> conn;  // null when the server dropped the handshake
  bool dropped_at_validate = false;            // a torch 1.13 server
  bool dropped_at_features = false;            // a torch 2.x server: it does not know FEATURES
  uint64_t features = 0;
};

// Opens a connection and does the handshake of `dialect`, the FEATURES probe
// when asked (sent in the same write, so it costs no round trip), and
// authentication when there is a token.
Handshake open_connection(const std::string& host, uint16_t port, Dialect dialect, bool probe_features,
                          const std::optional<std::string>& token, Deadline deadline) {
  Handshake h;
  auto conn = TCPClientSocket::connect_with_retry(host, port, deadline);
  if (dialect == Dialect::kLegacy113) {
    h.conn = std::move(conn);
    return h;
  }
  std::vector<uint8_t> hello;
  wire::Encoder e(&hello);
  const uint32_t nonce = static_cast<uint32_t>(::getpid());
  e.u8(static_cast<uint8_t>(Query::kValidate)).u32(wire::kValidateMagic);
  e.u8(static_cast<uint8_t>(Query::kPing)).u32(nonce);
  if (probe_features) e.u8(static_cast<uint8_t>(Query::kFeatures));
  try {
    conn->send(hello, deadline);
    uint32_t echo = conn->recv_fixed<uint32_t>(deadline);
    TR_CHECK(echo == nonce, DistBackendError, "TCPStore {}: the server answered PING with {} instead of {}",
             conn->where(), echo, nonce);
  } catch (const PeerClosed&) {
    h.dropped_at_validate = true;
    return h;
  }
  if (probe_features) {
    try {
      h.features = conn->recv_fixed<uint64_t>(deadline);
    } catch (const PeerClosed&) {
      h.dropped_at_features = true;
      return h;
    }
  }
  h.conn = std::move(conn);
  if (!token) return h;
  TCPClientSocket* c = h.conn.get();
  try {
    std::vector<uint8_t> client_nonce = random_nonce(), msg;
    wire::Encoder(&msg).u8(static_cast<uint8_t>(Query::kAuthHello)).raw(client_nonce.data(), client_nonce.size());
    c->send(msg, deadline);
    std::vector<uint8_t> server_nonce(wire::kAuthNonceBytes), server_mac(wire::kAuthMacBytes);
    c->recv(server_nonce.data(), server_nonce.size(), deadline);
    c->recv(server_mac.data(), server_mac.size(), deadline);
    TR_CHECK(macs_equal(server_mac, auth_mac(*token, "server", client_nonce)), DistBackendError,
             "TCPStore {}: the server could not prove it knows the token ({}): refusing to talk to it", c->where(),
             kStoreTokenEnv);
    std::vector<uint8_t> proof = auth_mac(*token, "client", server_nonce), msg2;
    wire::Encoder(&msg2).u8(static_cast<uint8_t>(Query::kAuthProof)).raw(proof.data(), proof.size());
    c->send(msg2, deadline);
    TR_CHECK(c->recv_fixed<uint8_t>(deadline) == wire::kAuthOk, DistBackendError,
             "TCPStore {}: unexpected reply to AUTH_PROOF", c->where());
  } catch (const PeerClosed&) {
    throw DistBackendError(fmt::format(
        "TCPStore {}: the server closed the connection during authentication: its token differs, or it has none "
        "({} must be set alike on both sides)",
        c->where(), kStoreTokenEnv));
  }
  return h;
}

}  // namespace

template <typename F>
auto TCPStore::with_connection(const char* op, F fn) {
  const Deadline deadline = deadline_after(timeout());
  try {
    if (!conn_) {
      Dialect want = dialect_ != Dialect::kUnknown ? dialect_ : options_.protocol;
      if (want != Dialect::kLegacy113) {
        Handshake h = open_connection(host_, port_, Dialect::kModern, probe_features_, options_.auth_token, deadline);
        if (h.dropped_at_features) {  // not a trainrun server: do without the extensions
          probe_features_ = false;
          h = open_connection(host_, port_, Dialect::kModern, false, options_.auth_token, deadline);
        }
        if (h.conn) {
          conn_ = std::move(h.conn);
          dialect_ = Dialect::kModern;
          features_ = h.features;
        }
        TR_CHECK(conn_ || want == Dialect::kUnknown, DistBackendError,
                 "TCPStore {}:{}: the server closed the connection at the handshake (is it a torch 1.13 server?)",
                 host_, port_);
      }
      if (!conn_) {
        TR_CHECK(!options_.auth_token, DistBackendError,
                 "TCPStore {}:{}: the server speaks torch 1.13's protocol, which cannot authenticate, but a token "
                 "is set ({})", host_, port_, kStoreTokenEnv);
        conn_ = open_connection(host_, port_, Dialect::kLegacy113, false, std::nullopt, deadline).conn;
        dialect_ = Dialect::kLegacy113;
        features_ = 0;
      }
    }
    return fn(*conn_, deadline);
  } catch (const DeadlinePassed&) {
    conn_.reset();  // a reply may still arrive: never reuse this connection
    throw StoreTimeoutError(fmt::format("TCPStore {}:{}: {} timed out after {} ms", host_, port_, op, timeout().count()));
  } catch (const PeerClosed&) {
    conn_.reset();
    throw DistBackendError(fmt::format("TCPStore {}:{}: the server closed the connection during {}", host_, port_, op));
  } catch (...) {
    conn_.reset();
    throw;
  }
}

TCPStore::TCPStore(std::string host, uint16_t port, TCPStoreOptions options)
    : Store(options.timeout), host_(std::move(host)), port_(port), options_(std::move(options)) {
  TR_CHECK(options_.timeout.count() > 0, ValueError, "TCPStore: timeout must be positive, got {} ms",
           options_.timeout.count());
  if (options_.num_workers) TR_CHECK(*options_.num_workers >= 1, ValueError,
                                     "TCPStore: num_workers must be positive, got {}", *options_.num_workers);
  TR_CHECK(!options_.master_listen_fd || !options_.use_libuv, NotImplementedError,
           "TCPStore(master_listen_fd=...) is not supported by the libuv backend; pass use_libuv=False to listen on "
           "the socket handed in");
  TR_CHECK(!options_.master_listen_fd || options_.is_master, ValueError,
           "TCPStore: master_listen_fd is for the master (is_master=True)");
  if (!options_.auth_token) options_.auth_token = store_token_from_env();
  if (options_.is_master) {
    TCPStoreServer::Options so;
    so.host = host_;
    so.port = port_;
    so.auth_token = options_.auth_token;
    so.listen_fd = options_.master_listen_fd;
    server_ = std::make_unique<TCPStoreServer>(std::move(so));
    port_ = server_->port();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    with_connection("connect", [](Connection&, Deadline) { return 0; });
  }
  if (options_.num_workers) {
    add(kInitKey, 1);
    if (options_.is_master && options_.wait_for_workers) wait_for_workers(timeout());
  }
}

TCPStore::~TCPStore() = default;

wire::Dialect TCPStore::dialect() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dialect_;
}

bool TCPStore::server_orders_waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (features_ & wire::kFeatureOrderedWaits) != 0;
}

void TCPStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  with_connection("set", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kSet);
    r.enc().str(wire_key(key)).bytes(value);
    c.send(r.buffer(), d);
    return 0;
  });
}

void TCPStore::wait_locked(const std::vector<std::string>& keys, Milliseconds timeout, const char* op) {
  std::vector<std::string> wk = wire_keys(keys);
  const Deadline deadline = deadline_after(timeout);
  bool timed_out = with_connection(op, [&](Connection& c, Deadline) {
    RequestBuilder r(dialect_, Query::kWait);
    append_keys(r.enc(), wk);
    c.send(r.buffer(), deadline);
    try {
      uint8_t reply = c.recv_fixed<uint8_t>(deadline);
      TR_CHECK(reply == wire::kStopWaiting, DistBackendError, "TCPStore {}: unexpected reply {} to WAIT", c.where(),
               reply);
      return false;
    } catch (const DeadlinePassed&) {
    }
    // Cancel on the wire so the connection stays in step; the reply may be
    // STOP_WAITING (the keys came just now) followed by WAIT_CANCELED.
    if (dialect_ == Dialect::kModern) {
      const Deadline grace = Clock::now() + Milliseconds(5000);
      try {
        c.send({static_cast<uint8_t>(Query::kCancelWait)}, grace);
        uint8_t reply = c.recv_fixed<uint8_t>(grace);
        if (reply == wire::kStopWaiting) reply = c.recv_fixed<uint8_t>(grace);
        if (reply == wire::kWaitCanceled) return true;
      } catch (const DeadlinePassed&) {
      }
    }
    conn_.reset();  // torch 1.13 cannot cancel: a late STOP_WAITING would desynchronize this connection
    return true;
  });
  if (timed_out)
    throw StoreTimeoutError(fmt::format("TCPStore {}:{}: {} timed out after {} ms waiting for keys [{}]", host_, port_, op,
                                   timeout.count(), fmt::join(keys, ", ")));
}

Bytes TCPStore::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (features_ & wire::kFeatureOrderedWaits) return get_pipelined({key}, "get")[0];
  wait_locked({key}, timeout(), "get");
  return with_connection("get", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kGet);
    r.enc().str(wire_key(key));
    c.send(r.buffer(), d);
    return c.recv_bytes(d);
  });
}

// WAIT and GET (or MULTI_GET) in one write: a trainrun server serves the GET
// once the WAIT is answered. On timeout the GET is still queued behind the
// WAIT, so the connection is replaced instead of cancelled.
std::vector<Bytes> TCPStore::get_pipelined(const std::vector<std::string>& keys, const char* op) {
  std::vector<std::string> wk = wire_keys(keys);
  std::optional<std::vector<Bytes>> values = with_connection(op, [&](Connection& c, Deadline d) {
    RequestBuilder wait(dialect_, Query::kWait);
    append_keys(wait.enc(), wk);
    RequestBuilder get(dialect_, keys.size() == 1 ? Query::kGet : Query::kMultiGet);
    if (keys.size() == 1)
      get.enc().str(wk[0]);
    else
      append_keys(get.enc(), wk);
    std::vector<uint8_t>& batch = wait.buffer();
    batch.insert(batch.end(), get.buffer().begin(), get.buffer().end());
    c.send(batch, d);
    std::vector<Bytes> out;
    try {
      uint8_t reply = c.recv_fixed<uint8_t>(d);
      TR_CHECK(reply == wire::kStopWaiting, DistBackendError, "TCPStore {}: unexpected reply {} to WAIT", c.where(),
               reply);
    } catch (const DeadlinePassed&) {
      conn_.reset();
      return std::optional<std::vector<Bytes>>();
    }
    for (size_t i = 0; i < keys.size(); ++i) out.push_back(c.recv_bytes(d));
    return std::optional<std::vector<Bytes>>(std::move(out));
  });
  if (!values)
    throw StoreTimeoutError(fmt::format("TCPStore {}:{}: {} timed out after {} ms waiting for keys [{}]", host_, port_, op,
                                   timeout().count(), fmt::join(keys, ", ")));
  return std::move(*values);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  return with_connection("add", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kAdd);
    r.enc().str(key == kInitKey ? key : wire_key(key)).i64(delta);
    c.send(r.buffer(), d);
    return c.recv_fixed<int64_t>(d);
  });
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  return with_connection("compare_set", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kCompareSet);
    r.enc().str(wire_key(key)).bytes(expected).bytes(desired);
    c.send(r.buffer(), d);
    return c.recv_bytes(d);
  });
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return with_connection("check", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kCheck);
    append_keys(r.enc(), wire_keys(keys));
    c.send(r.buffer(), d);
    return c.recv_fixed<uint8_t>(d) == wire::kCheckReady;
  });
}

void TCPStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  wait_locked(keys, timeout, "wait");
}

bool TCPStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return with_connection("delete_key", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kDeleteKey);
    r.enc().str(wire_key(key));
    c.send(r.buffer(), d);
    return c.recv_fixed<int64_t>(d) == 1;
  });
}

int64_t TCPStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return with_connection("num_keys", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kGetNumKeys);
    c.send(r.buffer(), d);
    return c.recv_fixed<int64_t>(d);
  });
}

void TCPStore::append(const std::string& key, const Bytes& value) {
  std::unique_lock<std::mutex> lock(mu_);
  if (dialect_ == Dialect::kLegacy113) {
    // torch 1.13 has no APPEND: compare-and-set until no one raced us.
    lock.unlock();
    Bytes current = check({key}) ? get(key) : Bytes();
    for (;;) {
      Bytes desired = current;
      desired.insert(desired.end(), value.begin(), value.end());
      Bytes after = compare_set(key, current, desired);
      if (after == desired) return;
      current = check({key}) ? get(key) : Bytes();
    }
  }
  with_connection("append", [&](Connection& c, Deadline d) {
    RequestBuilder r(dialect_, Query::kAppend);
    r.enc().str(wire_key(key)).bytes(value);
    c.send(r.buffer(), d);
    return 0;
  });
}

std::vector<Bytes> TCPStore::multi_get(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  if (keys.empty()) return {};
  if (features_ & wire::kFeatureOrderedWaits) return get_pipelined(keys, "multi_get");
  wait_locked(keys, timeout(), "multi_get");
  return with_connection("multi_get", [&](Connection& c, Deadline d) {
    std::vector<Bytes> values;
    if (dialect_ == Dialect::kLegacy113) {
      // One batch of GETs, then the replies in order: still one round trip.
      std::vector<uint8_t> batch;
      for (const std::string& k : keys) {
        RequestBuilder r(dialect_, Query::kGet);
        r.enc().str(wire_key(k));
        batch.insert(batch.end(), r.buffer().begin(), r.buffer().end());
      }
      c.send(batch, d);
    } else {
      RequestBuilder r(dialect_, Query::kMultiGet);
      append_keys(r.enc(), wire_keys(keys));
      c.send(r.buffer(), d);
    }
    for (size_t i = 0; i < keys.size(); ++i) values.push_back(c.recv_bytes(d));
    return values;
  });
}

void TCPStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  check_multi_set("multi_set", keys, values);
  std::lock_guard<std::mutex> lock(mu_);
  with_connection("multi_set", [&](Connection& c, Deadline d) {
    std::vector<uint8_t> batch;
    if (dialect_ == Dialect::kLegacy113) {
      for (size_t i = 0; i < keys.size(); ++i) {
        RequestBuilder r(dialect_, Query::kSet);
        r.enc().str(wire_key(keys[i])).bytes(values[i]);
        batch.insert(batch.end(), r.buffer().begin(), r.buffer().end());
      }
    } else {
      RequestBuilder r(dialect_, Query::kMultiSet);
      r.enc().u64(keys.size());
      for (size_t i = 0; i < keys.size(); ++i) r.enc().str(wire_key(keys[i])).bytes(values[i]);
      batch.swap(r.buffer());
    }
    c.send(batch, d);
    return 0;
  });
}

void TCPStore::wait_for_workers(Milliseconds timeout) {
  TR_CHECK(options_.num_workers.has_value(), ValueError,
           "TCPStore {}:{}: wait_for_workers needs num_workers in the options", host_, port_);
  // Like torch's master: poll the counter until every worker has registered.
  const Deadline deadline = deadline_after(timeout);
  int64_t registered = 0;
  while ((registered = add(kInitKey, 0)) < *options_.num_workers) {
    if (Clock::now() >= deadline)
      throw StoreTimeoutError(fmt::format("TCPStore {}:{}: only {} of {} workers registered within {} ms", host_, port_,
                                     registered, *options_.num_workers, timeout.count()));
    std::this_thread::sleep_for(Milliseconds(10));
  }
}

}  // namespace trainrun
