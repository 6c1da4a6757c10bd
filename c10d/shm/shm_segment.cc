#include "c10d/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace trainrun {
namespace c10d {
namespace {

void* map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  TR_CHECK(p != MAP_FAILED, DistBackendError, "shared memory {}: mmap of {} bytes failed: {}", name, bytes,
           std::strerror(err));
  return p;
}

}  // namespace

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  TR_CHECK(fd >= 0, DistBackendError, "shared memory {}: cannot create it: {}", name, std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw DistBackendError(fmt::format("shared memory {}: cannot size it to {} bytes: {} (is /dev/shm large enough?)",
                                       name, bytes, std::strerror(err)));
  }
  ShmSegment s;
  s.name_ = name;
  s.bytes_ = bytes;
  s.owner_ = true;
  try {
    s.data_ = map_fd(fd, bytes, name);
  } catch (...) {
    shm_unlink(name.c_str());
    throw;
  }
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  TR_CHECK(fd >= 0, DistBackendError, "shared memory {}: cannot open it: {}", name, std::strerror(errno));
  ShmSegment s;
  s.name_ = name;
  s.bytes_ = bytes;
  s.data_ = map_fd(fd, bytes, name);
  return s;
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    owner_ = std::exchange(o.owner_, false);
  }
  return *this;
}

ShmSegment::~ShmSegment() {
  unlink();
  if (data_ != nullptr) munmap(data_, bytes_);
  data_ = nullptr;
}

void ShmSegment::unlink() {
  if (owner_) shm_unlink(name_.c_str());
  owner_ = false;
}

}  // namespace c10d
}  // namespace trainrun
