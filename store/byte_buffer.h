#pragma once
// The bytes a store connection has received: a buffer whose unparsed bytes
// live in [begin, size). Reads go to its tail without zero-filling it first,
// and consumed bytes are reclaimed by moving the rest down once they are half
// of it (or all of it).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

namespace trainrun {

class ByteBuffer {
 public:
  uint8_t* tail(size_t n) {
    if (begin_ > 0 && (begin_ == size_ || begin_ >= capacity_ / 2)) {
      std::memmove(data_.get(), data_.get() + begin_, size_ - begin_);
      size_ -= begin_;
      begin_ = 0;
    }
    if (size_ + n > capacity_) {
      size_t cap = std::max(capacity_ * 2, size_ + n);
      std::unique_ptr<uint8_t[]> bigger(new uint8_t[cap]);
      if (size_ > begin_) std::memcpy(bigger.get(), data_.get() + begin_, size_ - begin_);
      size_ -= begin_;
      begin_ = 0;
      data_ = std::move(bigger);
      capacity_ = cap;
    }
    return data_.get() + size_;
  }
  void commit(size_t n) { size_ += n; }
  void consume(size_t n) { begin_ += n; }
  const uint8_t* data() const { return data_.get() + begin_; }
  size_t size() const { return size_ - begin_; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t capacity_ = 0, size_ = 0, begin_ = 0;
};

}  // namespace trainrun
