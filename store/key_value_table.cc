#include "store/key_value_table.h"

#include <charconv>

#include "base/error.h"

namespace trainrun {

std::optional<int64_t> parse_decimal(const Bytes& value) {
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  if (begin != end && *begin == '+') ++begin;  // std::stoll accepts a leading '+', as PyTorch does
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || ptr != end || begin == end) return std::nullopt;
  return v;
}

bool KeyValueTable::set(const std::string& key, Bytes value) {
  auto [it, inserted] = map_.try_emplace(key);
  it->second = std::move(value);
  return inserted;
}

bool KeyValueTable::append(const std::string& key, const Bytes& value) {
  auto [it, inserted] = map_.try_emplace(key);
  it->second.insert(it->second.end(), value.begin(), value.end());
  return inserted;
}

int64_t KeyValueTable::add(const std::string& key, int64_t delta, bool* created) {
  auto it = map_.find(key);
  int64_t current = 0;
  if (it != map_.end()) {
    std::optional<int64_t> parsed = parse_decimal(it->second);
    TR_CHECK(parsed.has_value(), ValueError, "add: the value of key '{}' is not a decimal integer (it has {} bytes)",
             key, it->second.size());
    current = *parsed;
  }
  int64_t result = 0;
  TR_CHECK(!__builtin_add_overflow(current, delta, &result), ValueError,
           "add: {} + {} overflows int64 for key '{}'", current, delta, key);
  std::string text = std::to_string(result);
  *created = set(key, Bytes(text.begin(), text.end()));
  return result;
}

Bytes KeyValueTable::compare_set(const std::string& key, const Bytes& expected, Bytes desired, bool* created) {
  *created = false;
  auto it = map_.find(key);
  if (it == map_.end()) {
    if (!expected.empty()) return expected;  // PyTorch's quirk: nothing is stored
    *created = true;
    map_.emplace(key, desired);
    return desired;
  }
  if (it->second == expected) it->second = std::move(desired);
  return it->second;
}

bool KeyValueTable::erase(const std::string& key) { return map_.erase(key) != 0; }

const Bytes* KeyValueTable::find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

bool KeyValueTable::contains_all(const std::vector<std::string>& keys) const {
  return !first_missing(keys).has_value();
}

std::optional<std::string> KeyValueTable::first_missing(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys)
    if (!contains(k)) return k;
  return std::nullopt;
}

}  // namespace trainrun
