#pragma once
// An in-process store, safe to share between threads (PyTorch's HashStore):
// for tests and for single-process groups.
#include <condition_variable>
#include <mutex>

#include "store/key_value_table.h"
#include "store/store.h"

namespace trainrun {

class HashStore final : public Store {
 public:
  explicit HashStore(Milliseconds timeout = kDefaultTimeout) : Store(timeout) {}

  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Milliseconds timeout) override;
  using Store::wait;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  void append(const std::string& key, const Bytes& value) override;
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys) override;
  void multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;

 private:
  // Waits with mu_ held until all keys exist; throws TimeoutError naming `op`.
  void wait_locked(std::unique_lock<std::mutex>& lock, const char* op, const std::vector<std::string>& keys,
                   Milliseconds timeout);

  std::mutex mu_;
  std::condition_variable key_created_;
  KeyValueTable table_;
};

}  // namespace trainrun
