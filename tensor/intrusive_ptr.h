#pragma once
// A smart pointer over objects that carry their own reference count: one
// allocation per object, and a raw pointer can be turned back into an owner
// (needed when memory crosses a C ABI such as DLPack).
#include <atomic>
#include <cstdint>
#include <utility>

namespace trainrun {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;
  virtual ~RefCounted() = default;
  void incref() const { refcount_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this was the last reference.
  bool decref() const { return refcount_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  int64_t use_count() const { return refcount_.load(std::memory_order_relaxed); }

 private:
  mutable std::atomic<int64_t> refcount_{0};
};

template <typename T>
class intrusive_ptr {
 public:
  intrusive_ptr() = default;
  explicit intrusive_ptr(T* p) : p_(p) { if (p_) p_->incref(); }
  intrusive_ptr(const intrusive_ptr& o) : p_(o.p_) { if (p_) p_->incref(); }
  intrusive_ptr(intrusive_ptr&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  template <typename U>
  intrusive_ptr(intrusive_ptr<U> o) : p_(o.release()) {}  // NOLINT: upcast
  ~intrusive_ptr() { reset(); }
  intrusive_ptr& operator=(intrusive_ptr o) noexcept { std::swap(p_, o.p_); return *this; }

  template <typename... Args>
  static intrusive_ptr make(Args&&... args) { return intrusive_ptr(new T(std::forward<Args>(args)...)); }

  void reset() { if (p_ && p_->decref()) delete p_; p_ = nullptr; }
  // Gives up ownership without decrementing; pair with adopt().
  T* release() { T* p = p_; p_ = nullptr; return p; }
  static intrusive_ptr adopt(T* p) { intrusive_ptr r; r.p_ = p; return r; }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  bool operator==(const intrusive_ptr& o) const { return p_ == o.p_; }
  bool operator!=(const intrusive_ptr& o) const { return p_ != o.p_; }

 private:
  T* p_ = nullptr;
};

}  // namespace trainrun
