#pragma once
// A POSIX shared-memory segment mapped into this process. The creator names
// it, peers open it by name, and the creator unlinks the name once every
// peer has mapped it: from then on nothing outlives the processes, even when
// they crash.
#include <cstddef>
#include <string>

namespace trainrun {
namespace c10d {

class ShmSegment {
 public:
  // Creates (fails if the name exists) and maps `bytes` bytes, zeroed.
  static ShmSegment create(const std::string& name, size_t bytes);
  // Maps an existing segment of `bytes` bytes.
  static ShmSegment open(const std::string& name, size_t bytes);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ~ShmSegment();

  // Removes the name (the mapping stays valid); safe to call twice.
  void unlink();
  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  std::string name_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
};

}  // namespace c10d
}  // namespace trainrun
