#pragma once
// A store in one file, for processes on one machine or on a shared
// filesystem (PyTorch's FileStore, `file://` init). The file is an
// append-only log of set/delete records; every operation takes an exclusive
// flock, reads the records other processes appended since its last look,
// and appends its own; a lock held past the timeout is a TimeoutError.
// Waiting polls the file (every 2 to 20 ms). Each
// FileStore counts itself in the file; the last one to go removes the file.
#include <mutex>
#include <unordered_map>

#include "store/store.h"

namespace trainrun {

class FileStore final : public Store {
 public:
  // Creates the file when missing. Throws DistBackendError naming the path.
  explicit FileStore(std::string path, Milliseconds timeout = kDefaultTimeout);
  ~FileStore() override;

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

  const std::string& path() const { return path_; }

 private:
  class FileLock;
  // Reads records appended since the last look into keys_ (lock held).
  void catch_up();
  void append_record(uint8_t kind, const std::string& key, const Bytes& value);
  // Runs fn with the file locked and caught up.
  template <typename F>
  auto locked(F fn);
  // Polls until every key exists; returns their values when asked.
  std::vector<Bytes> wait_for(const std::vector<std::string>& keys, Milliseconds timeout, const char* op,
                              bool want_values);

  std::string path_;
  int fd_ = -1;
  uint64_t read_offset_ = 0;
  std::unordered_map<std::string, Bytes> keys_;
  std::mutex mu_;  // threads of this process; flock serializes processes
};

}  // namespace trainrun
