#pragma once
// The key-value store every distributed job starts with: ranks publish
// addresses and counters under string keys and block until others' keys
// appear. Same operations and semantics as PyTorch's c10d::Store.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/time.h"

namespace trainrun {

using Bytes = std::vector<uint8_t>;

Bytes to_bytes(const std::string& s);
std::string to_string(const Bytes& b);

class Store {
 public:
  // PyTorch's default store timeout.
  static constexpr Milliseconds kDefaultTimeout{300000};

  explicit Store(Milliseconds timeout = kDefaultTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until the key exists or timeout() passes (StoreTimeoutError).
  virtual Bytes get(const std::string& key) = 0;
  // Adds delta to the integer stored as decimal text (missing: 0); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets desired if the current value equals expected (a missing key matches
  // an empty expected); returns the value after the operation. PyTorch's
  // quirk is kept: a missing key with non-empty expected returns expected.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // True when every key exists; never blocks.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists, or throws StoreTimeoutError naming the missing keys.
  virtual void wait(const std::vector<std::string>& keys, Milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  // Returns whether the key existed.
  virtual bool delete_key(const std::string& key) = 0;
  // Every key in the store, whatever its prefix.
  virtual int64_t num_keys() = 0;
  // Appends to the value, creating the key when missing.
  virtual void append(const std::string& key, const Bytes& value) = 0;
  // Waits for all keys (up to timeout()), then returns their values in order.
  virtual std::vector<Bytes> multi_get(const std::vector<std::string>& keys) = 0;
  virtual void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) = 0;

  Milliseconds timeout() const { return timeout_; }
  void set_timeout(Milliseconds timeout) { timeout_ = timeout; }

  // Conveniences for text values.
  void set(const std::string& key, const std::string& value) { set(key, to_bytes(value)); }
  std::string get_string(const std::string& key) { return to_string(get(key)); }

 protected:
  // Throws ValueError unless keys and values pair up, naming `op`.
  static void check_multi_set(const char* op, const std::vector<std::string>& keys, const std::vector<Bytes>& values);

 private:
  Milliseconds timeout_;
};

}  // namespace trainrun
