#include "store/hash_store.h"

#include "base/error.h"

namespace trainrun {

void HashStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (table_.set(key, value)) key_created_.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, "get", {key}, timeout());
  return *table_.find(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  bool created = false;
  int64_t v = table_.add(key, delta, &created);
  if (created) key_created_.notify_all();
  return v;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  bool created = false;
  Bytes v = table_.compare_set(key, expected, desired, &created);
  if (created) key_created_.notify_all();
  return v;
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.contains_all(keys);
}

void HashStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, "wait", keys, timeout);
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.erase(key);
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.size();
}

void HashStore::append(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (table_.append(key, value)) key_created_.notify_all();
}

std::vector<Bytes> HashStore::multi_get(const std::vector<std::string>& keys) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, "multi_get", keys, timeout());
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const std::string& k : keys) values.push_back(*table_.find(k));
  return values;
}

void HashStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  check_multi_set("multi_set", keys, values);
  std::lock_guard<std::mutex> lock(mu_);
  bool created = false;
  for (size_t i = 0; i < keys.size(); ++i) created |= table_.set(keys[i], values[i]);
  if (created) key_created_.notify_all();
}

void HashStore::wait_locked(std::unique_lock<std::mutex>& lock, const char* op, const std::vector<std::string>& keys,
                            Milliseconds timeout) {
  auto deadline = deadline_after(timeout);
  while (auto missing = table_.first_missing(keys)) {
    if (key_created_.wait_until(lock, deadline) == std::cv_status::timeout && !table_.contains_all(keys))
      throw StoreTimeoutError(fmt::format("HashStore {}: timed out after {} ms waiting for key '{}'", op, timeout.count(),
                                     *table_.first_missing(keys)));
  }
}

}  // namespace trainrun
