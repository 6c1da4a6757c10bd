#include "store/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "base/error.h"
#include "store/key_value_table.h"

namespace trainrun {
namespace {

constexpr uint8_t kRecordSet = 1, kRecordDelete = 2;
// The count of live FileStores on the file, kept in the file itself under a
// key that starts with NUL, which no real key does; num_keys() leaves it out.
const std::string kUsersKey = std::string("\0trainrun/users", 15);

std::string errno_text() { return std::strerror(errno); }

}  // namespace

// flock(LOCK_EX) for a scope. A process that holds the lock and hangs must
// not hang everyone else: the lock is polled (1 to 20 ms apart) until the
// store's timeout, then TimeoutError names the file.
class FileStore::FileLock {
 public:
  FileLock(int fd, const std::string& path, Milliseconds timeout) : fd_(fd) {
    const auto deadline = deadline_after(timeout);
    auto pause = std::chrono::milliseconds(1);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK)
        throw DistBackendError(fmt::format("FileStore {}: flock failed: {}", path, errno_text()));
      if (std::chrono::steady_clock::now() >= deadline)
        throw StoreTimeoutError(fmt::format("FileStore {}: another process held the file's lock for over {} ms", path,
                                       timeout.count()));
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }
  ~FileLock() { ::flock(fd_, LOCK_UN); }

 private:
  int fd_;
};

template <typename F>
auto FileStore::locked(F fn) {
  std::lock_guard<std::mutex> guard(mu_);
  FileLock lock(fd_, path_, timeout());
  catch_up();
  return fn();
}

FileStore::FileStore(std::string path, Milliseconds timeout) : Store(timeout), path_(std::move(path)) {
  TR_CHECK(!path_.empty(), ValueError, "FileStore: empty path");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw DistBackendError(fmt::format("FileStore {}: cannot open: {}", path_, errno_text()));
  try {
    locked([&] {
      auto it = keys_.find(kUsersKey);
      int64_t users = it == keys_.end() ? 0 : parse_decimal(it->second).value_or(0);
      append_record(kRecordSet, kUsersKey, to_bytes(std::to_string(users + 1)));
      return 0;
    });
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

FileStore::~FileStore() {
  try {
    locked([&] {
      auto it = keys_.find(kUsersKey);
      int64_t users = it == keys_.end() ? 1 : parse_decimal(it->second).value_or(1);
      if (users <= 1)
        ::unlink(path_.c_str());  // the last one out; still holding the lock
      else
        append_record(kRecordSet, kUsersKey, to_bytes(std::to_string(users - 1)));
      return 0;
    });
  } catch (const std::exception&) {
    // A destructor must not throw; the file stays behind.
  }
  ::close(fd_);
}

void FileStore::catch_up() {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw DistBackendError(fmt::format("FileStore {}: fstat failed: {}", path_, errno_text()));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size <= read_offset_) return;
  std::vector<uint8_t> buf(size - read_offset_);
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t n = ::pread(fd_, buf.data() + got, buf.size() - got, static_cast<off_t>(read_offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw DistBackendError(fmt::format("FileStore {}: read failed: {}", path_, n < 0 ? errno_text() : "EOF"));
    got += static_cast<size_t>(n);
  }
  // Records: kind(u8) key_len(u64) key value_len(u64) value. Writers append
  // whole records under the lock, so a cut record means a writer died mid-write.
  size_t p = 0;
  auto corrupt = [&](const char* why) {
    return DistBackendError(fmt::format("FileStore {}: corrupt record at byte {}: {}", path_, read_offset_ + p, why));
  };
  auto read_u64 = [&](size_t at, uint64_t* v) {
    if (at + 8 > buf.size()) return false;
    std::memcpy(v, buf.data() + at, 8);
    return true;
  };
  while (p < buf.size()) {
    uint8_t kind = buf[p];
    if (kind != kRecordSet && kind != kRecordDelete) throw corrupt("unknown record kind");
    uint64_t klen = 0, vlen = 0;
    if (!read_u64(p + 1, &klen) || klen > buf.size() - p - 9) throw corrupt("truncated key");
    size_t kat = p + 9;
    if (!read_u64(kat + klen, &vlen) || vlen > buf.size() - (kat + klen + 8)) throw corrupt("truncated value");
    size_t vat = kat + klen + 8;
    std::string key(reinterpret_cast<const char*>(buf.data() + kat), klen);
    if (kind == kRecordSet)
      keys_[key] = Bytes(buf.begin() + vat, buf.begin() + vat + vlen);
    else
      keys_.erase(key);
    p = vat + vlen;
  }
  read_offset_ = size;
}

void FileStore::append_record(uint8_t kind, const std::string& key, const Bytes& value) {
  std::vector<uint8_t> rec;
  rec.reserve(17 + key.size() + value.size());
  rec.push_back(kind);
  uint64_t klen = key.size(), vlen = value.size();
  rec.insert(rec.end(), reinterpret_cast<uint8_t*>(&klen), reinterpret_cast<uint8_t*>(&klen) + 8);
  rec.insert(rec.end(), key.begin(), key.end());
  rec.insert(rec.end(), reinterpret_cast<uint8_t*>(&vlen), reinterpret_cast<uint8_t*>(&vlen) + 8);
  rec.insert(rec.end(), value.begin(), value.end());
  size_t put = 0;
  while (put < rec.size()) {
    ssize_t n = ::pwrite(fd_, rec.data() + put, rec.size() - put, static_cast<off_t>(read_offset_ + put));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw DistBackendError(fmt::format("FileStore {}: write failed: {}", path_, errno_text()));
    put += static_cast<size_t>(n);
  }
  read_offset_ += rec.size();
  if (kind == kRecordSet)
    keys_[key] = value;
  else
    keys_.erase(key);
}

void FileStore::set(const std::string& key, const Bytes& value) {
  locked([&] {
    append_record(kRecordSet, key, value);
    return 0;
  });
}

std::vector<Bytes> FileStore::wait_for(const std::vector<std::string>& keys, Milliseconds timeout, const char* op,
                                       bool want_values) {
  const auto deadline = deadline_after(timeout);
  auto sleep = std::chrono::milliseconds(2);
  for (;;) {
    std::optional<std::string> missing;
    std::vector<Bytes> values = locked([&] {
      std::vector<Bytes> out;
      for (const std::string& k : keys) {
        auto it = keys_.find(k);
        if (it == keys_.end()) {
          missing = k;
          break;
        }
        if (want_values) out.push_back(it->second);
      }
      return out;
    });
    if (!missing) return values;
    if (std::chrono::steady_clock::now() >= deadline)
      throw StoreTimeoutError(fmt::format("FileStore {}: {} timed out after {} ms waiting for key '{}'", path_, op,
                                     timeout.count(), *missing));
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(20));
  }
}

Bytes FileStore::get(const std::string& key) { return wait_for({key}, timeout(), "get", true)[0]; }

int64_t FileStore::add(const std::string& key, int64_t delta) {
  return locked([&] {
    KeyValueTable scratch;  // the same ADD rules as every other store
    auto it = keys_.find(key);
    if (it != keys_.end()) scratch.set(key, it->second);
    bool created = false;
    int64_t v = scratch.add(key, delta, &created);
    append_record(kRecordSet, key, *scratch.find(key));
    return v;
  });
}

Bytes FileStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return locked([&] {
    KeyValueTable scratch;
    auto it = keys_.find(key);
    if (it != keys_.end()) scratch.set(key, it->second);
    bool created = false;
    Bytes result = scratch.compare_set(key, expected, desired, &created);
    const Bytes* after = scratch.find(key);
    if (after != nullptr && (it == keys_.end() || *after != it->second)) append_record(kRecordSet, key, *after);
    return result;
  });
}

bool FileStore::check(const std::vector<std::string>& keys) {
  return locked([&] {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return keys_.count(k) != 0; });
  });
}

void FileStore::wait(const std::vector<std::string>& keys, Milliseconds timeout) {
  wait_for(keys, timeout, "wait", false);
}

bool FileStore::delete_key(const std::string& key) {
  return locked([&] {
    if (!keys_.count(key)) return false;
    append_record(kRecordDelete, key, {});
    return true;
  });
}

int64_t FileStore::num_keys() {
  return locked([&] { return static_cast<int64_t>(keys_.size()) - (keys_.count(kUsersKey) ? 1 : 0); });
}

void FileStore::append(const std::string& key, const Bytes& value) {
  locked([&] {
    Bytes v = keys_.count(key) ? keys_[key] : Bytes();
    v.insert(v.end(), value.begin(), value.end());
    append_record(kRecordSet, key, v);
    return 0;
  });
}

std::vector<Bytes> FileStore::multi_get(const std::vector<std::string>& keys) {
  return wait_for(keys, timeout(), "multi_get", true);
}

void FileStore::multi_set(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  check_multi_set("multi_set", keys, values);
  locked([&] {
    for (size_t i = 0; i < keys.size(); ++i) append_record(kRecordSet, keys[i], values[i]);
    return 0;
  });
}

}  // namespace trainrun
