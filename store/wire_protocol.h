#pragma once
// PyTorch's TCPStore wire protocol, both dialects (see
// ../shared/protocols/): the modern one (torch >= 2.x: VALIDATE handshake,
// PING, APPEND, MULTI_*, CANCEL_WAIT) and torch 1.13's, whose query bytes
// are the modern ones minus one (DELETE_KEY excepted) and which has no
// handshake. Integers are little-endian; strings and byte vectors are a u64
// length and the raw bytes. Requests are self-delimiting and may arrive in
// any fragmentation, so the parser works on whatever bytes have arrived.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace trainrun {
namespace wire {

constexpr uint32_t kValidateMagic = 0x3C85F7CE;

// Query bytes of the modern dialect; legacy bytes are translated to these.
enum class Query : uint8_t {
  kValidate = 0x00,
  kSet = 0x01,
  kCompareSet = 0x02,
  kGet = 0x03,
  kAdd = 0x04,
  kCheck = 0x05,
  kWait = 0x06,
  kGetNumKeys = 0x07,
  kDeleteKey = 0x08,
  kAppend = 0x09,
  kMultiGet = 0x0a,
  kMultiSet = 0x0b,
  kCancelWait = 0x0c,
  kPing = 0x0d,
  // trainrun's own, sent only by trainrun clients: authentication with a
  // server that has a token, and a probe of the server's features.
  kAuthHello = 0x40,
  kAuthProof = 0x41,
  kFeatures = 0x42,
};

// Feature bits a trainrun server reports in reply to FEATURES (u64).
// kOrderedWaits: on a modern connection, requests sent behind a parked WAIT
// are served after it (CANCEL_WAIT excepted), so a client may send WAIT and
// GET together: a blocking get in one round trip.
constexpr uint64_t kFeatureOrderedWaits = 1;

enum class Dialect { kUnknown, kModern, kLegacy113 };

const char* query_name(Query q);
const char* dialect_name(Dialect d);

// One-byte replies.
constexpr uint8_t kCheckReady = 0, kCheckNotReady = 1;
constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1;
constexpr uint8_t kAuthOk = 1;
constexpr size_t kAuthNonceBytes = 32, kAuthMacBytes = 32;

// What a server accepts; checked as each length field arrives, before any
// allocation, so a bogus length costs nothing.
struct Limits {
  uint64_t max_key_bytes = 64 << 10;             // 64 KiB
  uint64_t max_value_bytes = uint64_t(256) << 20;  // 256 MiB
  uint64_t max_keys_per_request = 1 << 20;        // CHECK/WAIT/MULTI_* key count
  uint64_t max_request_bytes = uint64_t(512) << 20;
};

struct Request {
  Query type = Query::kValidate;
  std::vector<std::string> keys;
  std::vector<Bytes> values;  // SET/APPEND: 1, COMPARE_SET: expected and desired, MULTI_SET: one per key
  int64_t delta = 0;          // ADD
  uint32_t word = 0;          // VALIDATE magic, PING nonce
  std::vector<uint8_t> blob;  // AUTH_HELLO nonce, AUTH_PROOF mac (fixed sizes)
};

enum class ParseStatus { kComplete, kNeedMore, kInvalid };

struct ParseResult {
  ParseStatus status;
  size_t consumed = 0;  // bytes of the request when complete
  std::string error;    // why, when invalid
  uint64_t needed = 0;  // when more is needed: a lower bound on the request's size
};

// Which dialect a connection speaks, from its first bytes: the modern one
// opens with VALIDATE (00 + magic). nullopt: not enough bytes to tell.
std::optional<Dialect> detect_dialect(const uint8_t* data, size_t size);

// Parses one request from the front of [data, data + size).
ParseResult parse_request(const uint8_t* data, size_t size, Dialect dialect, const Limits& limits, Request* out);

// Appends little-endian fields to a request or reply being built.
class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>* out) : out_(out) {}
  Encoder& u8(uint8_t v) { out_->push_back(v); return *this; }
  Encoder& u32(uint32_t v) { return raw(&v, 4); }
  Encoder& u64(uint64_t v) { return raw(&v, 8); }
  Encoder& i64(int64_t v) { return raw(&v, 8); }
  Encoder& bytes(const uint8_t* p, size_t n) { u64(n); return raw(p, n); }
  Encoder& bytes(const Bytes& b) { return bytes(b.data(), b.size()); }
  Encoder& str(const std::string& s) { return bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }
  Encoder& raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out_->insert(out_->end(), b, b + n);
    return *this;
  }

 private:
  std::vector<uint8_t>* out_;
};

// The byte a query is sent as in `dialect`; nullopt when the dialect lacks it.
std::optional<uint8_t> query_byte(Query q, Dialect dialect);

}  // namespace wire
}  // namespace trainrun
