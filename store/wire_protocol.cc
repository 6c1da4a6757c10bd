#include "store/wire_protocol.h"

#include <cstring>

#include <fmt/format.h>

namespace trainrun {
namespace wire {

const char* query_name(Query q) {
  switch (q) {
    case Query::kValidate: return "VALIDATE";
    case Query::kSet: return "SET";
    case Query::kCompareSet: return "COMPARE_SET";
    case Query::kGet: return "GET";
    case Query::kAdd: return "ADD";
    case Query::kCheck: return "CHECK";
    case Query::kWait: return "WAIT";
    case Query::kGetNumKeys: return "GETNUMKEYS";
    case Query::kDeleteKey: return "DELETE_KEY";
    case Query::kAppend: return "APPEND";
    case Query::kMultiGet: return "MULTI_GET";
    case Query::kMultiSet: return "MULTI_SET";
    case Query::kCancelWait: return "CANCEL_WAIT";
    case Query::kPing: return "PING";
    case Query::kAuthHello: return "AUTH_HELLO";
    case Query::kAuthProof: return "AUTH_PROOF";
    case Query::kFeatures: return "FEATURES";
  }
  return "?";
}

const char* dialect_name(Dialect d) {
  switch (d) {
    case Dialect::kModern: return "modern";
    case Dialect::kLegacy113: return "torch-1.13";
    case Dialect::kUnknown: break;
  }
  return "unknown";
}

std::optional<Dialect> detect_dialect(const uint8_t* data, size_t size) {
  if (size == 0) return std::nullopt;
  if (data[0] != 0x00) return Dialect::kLegacy113;
  if (size < 5) return std::nullopt;
  uint32_t magic;
  std::memcpy(&magic, data + 1, 4);
  // A 1.13 SET whose key length starts with these bytes would be over 1 GiB:
  // the magic cannot be confused with a real legacy request.
  return magic == kValidateMagic ? Dialect::kModern : Dialect::kLegacy113;
}

std::optional<uint8_t> query_byte(Query q, Dialect dialect) {
  if (dialect != Dialect::kLegacy113) return static_cast<uint8_t>(q);
  switch (q) {
    case Query::kSet: case Query::kCompareSet: case Query::kGet: case Query::kAdd:
    case Query::kCheck: case Query::kWait: case Query::kGetNumKeys:
      return static_cast<uint8_t>(static_cast<uint8_t>(q) - 1);
    case Query::kDeleteKey: return 0x08;
    default: return std::nullopt;
  }
}

namespace {

std::optional<Query> decode_type(uint8_t byte, Dialect dialect) {
  if (dialect == Dialect::kLegacy113) {
    if (byte <= 0x06) return static_cast<Query>(byte + 1);
    if (byte == 0x08) return Query::kDeleteKey;
    return std::nullopt;  // 0x07 WATCH_KEY included: not served
  }
  if (byte <= 0x0d || (byte >= 0x40 && byte <= 0x42)) return static_cast<Query>(byte);
  return std::nullopt;
}

// Reads fields from the front of the buffer; remembers the first problem.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const Limits& limits) : p_(data), end_(data + size), begin_(data), limits_(limits) {}

  bool ok() const { return status_ == ParseStatus::kComplete; }
  ParseStatus status() const { return status_; }
  const std::string& error() const { return error_; }
  size_t consumed() const { return static_cast<size_t>(p_ - begin_); }
  uint64_t needed() const { return needed_; }

  template <typename T>
  bool fixed(T* v) {
    if (!ok()) return false;
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return need_more(sizeof(T));
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool count(uint64_t* n, const char* what) {
    if (!fixed(n)) return false;
    if (*n > limits_.max_keys_per_request)
      return invalid(fmt::format("{} count {} is over the limit of {}", what, *n, limits_.max_keys_per_request));
    return true;
  }
  bool string(std::string* s, const char* what, uint64_t max) {
    uint64_t n;
    if (!fixed(&n)) return false;
    if (n > max) return invalid(fmt::format("{} length {} is over the limit of {} bytes", what, n, max));
    if (consumed() + n > limits_.max_request_bytes)
      return invalid(fmt::format("request is over the limit of {} bytes", limits_.max_request_bytes));
    if (static_cast<uint64_t>(end_ - p_) < n) return need_more(n);
    s->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool key(std::string* s) { return string(s, "key", limits_.max_key_bytes); }
  bool value(Bytes* b) {
    uint64_t n;
    if (!fixed(&n)) return false;
    if (n > limits_.max_value_bytes)
      return invalid(fmt::format("value length {} is over the limit of {} bytes", n, limits_.max_value_bytes));
    if (consumed() + n > limits_.max_request_bytes)
      return invalid(fmt::format("request is over the limit of {} bytes", limits_.max_request_bytes));
    if (static_cast<uint64_t>(end_ - p_) < n) return need_more(n);
    b->assign(p_, p_ + n);
    p_ += n;
    return true;
  }
  bool blob(std::vector<uint8_t>* b, size_t n) {
    if (!ok()) return false;
    if (static_cast<size_t>(end_ - p_) < n) return need_more(n);
    b->assign(p_, p_ + n);
    p_ += n;
    return true;
  }
  bool invalid(std::string why) {
    status_ = ParseStatus::kInvalid;
    error_ = std::move(why);
    return false;
  }

 private:
  bool need_more(uint64_t field_bytes) {
    status_ = ParseStatus::kNeedMore;
    needed_ = consumed() + field_bytes;
    return false;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  const Limits& limits_;
  ParseStatus status_ = ParseStatus::kComplete;
  std::string error_;
  uint64_t needed_ = 0;
};

bool parse_keys(Cursor& c, Request* out) {
  uint64_t n = 0;
  if (!c.count(&n, "key")) return false;
  // Grown as keys arrive: a declared count alone allocates nothing.
  for (uint64_t i = 0; i < n; ++i) {
    out->keys.emplace_back();
    if (!c.key(&out->keys.back())) return false;
  }
  return true;
}

}  // namespace

ParseResult parse_request(const uint8_t* data, size_t size, Dialect dialect, const Limits& limits, Request* out) {
  Cursor c(data, size, limits);
  uint8_t byte = 0;
  if (!c.fixed(&byte)) return {c.status(), 0, c.error(), c.needed()};
  std::optional<Query> type = decode_type(byte, dialect);
  if (!type) {
    const char* hint = dialect == Dialect::kLegacy113 && byte == 0x07 ? " (WATCH_KEY is not served)" : "";
    return {ParseStatus::kInvalid, 0, fmt::format("unknown query type 0x{:02x}{}", byte, hint), 0};
  }
  *out = Request();
  out->type = *type;
  switch (*type) {
    case Query::kValidate:
    case Query::kPing:
      c.fixed(&out->word);
      break;
    case Query::kSet:
    case Query::kAppend:
      out->keys.resize(1);
      out->values.resize(1);
      c.key(&out->keys[0]) && c.value(&out->values[0]);
      break;
    case Query::kCompareSet:
      out->keys.resize(1);
      out->values.resize(2);
      c.key(&out->keys[0]) && c.value(&out->values[0]) && c.value(&out->values[1]);
      break;
    case Query::kGet:
    case Query::kDeleteKey:
      out->keys.resize(1);
      c.key(&out->keys[0]);
      break;
    case Query::kAdd:
      out->keys.resize(1);
      c.key(&out->keys[0]) && c.fixed(&out->delta);
      break;
    case Query::kCheck:
    case Query::kWait:
    case Query::kMultiGet:
      parse_keys(c, out);
      break;
    case Query::kMultiSet: {
      uint64_t n = 0;
      if (!c.count(&n, "key")) break;
      for (uint64_t i = 0; i < n; ++i) {
        out->keys.emplace_back();
        out->values.emplace_back();
        if (!c.key(&out->keys.back()) || !c.value(&out->values.back())) break;
      }
      break;
    }
    case Query::kGetNumKeys:
    case Query::kCancelWait:
    case Query::kFeatures:
      break;
    case Query::kAuthHello:
      c.blob(&out->blob, kAuthNonceBytes);
      break;
    case Query::kAuthProof:
      c.blob(&out->blob, kAuthMacBytes);
      break;
  }
  if (!c.ok()) return {c.status(), 0, c.error(), c.needed()};
  return {ParseStatus::kComplete, c.consumed(), {}, 0};
}

}  // namespace wire
}  // namespace trainrun
