#pragma once
// The data and the semantics of every store operation, without locking or
// waiting: HashStore wraps it in a mutex, TCPStoreServer owns one on its
// loop thread. Operations that may create a key report it, so that the
// caller can wake whoever waits for it.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/store.h"

namespace trainrun {

class KeyValueTable {
 public:
  // Each mutating operation returns true when it created the key.
  bool set(const std::string& key, Bytes value);
  bool append(const std::string& key, const Bytes& value);
  // Throws ValueError when the stored value is not a decimal int64 or the sum overflows.
  int64_t add(const std::string& key, int64_t delta, bool* created);
  Bytes compare_set(const std::string& key, const Bytes& expected, Bytes desired, bool* created);
  bool erase(const std::string& key);

  const Bytes* find(const std::string& key) const;
  bool contains(const std::string& key) const { return map_.count(key) != 0; }
  bool contains_all(const std::vector<std::string>& keys) const;
  // The first key of `keys` that is missing, if any.
  std::optional<std::string> first_missing(const std::vector<std::string>& keys) const;
  int64_t size() const { return static_cast<int64_t>(map_.size()); }

 private:
  std::unordered_map<std::string, Bytes> map_;
};

// Parses a whole value as a decimal int64 ("-12"); nullopt otherwise.
std::optional<int64_t> parse_decimal(const Bytes& value);

}  // namespace trainrun
