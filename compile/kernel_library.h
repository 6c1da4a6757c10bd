#pragma once
// Generated C++ compiled by the system compiler at first use and cached on
// disk by a hash of the source and the flags, so a later process (or call)
// loads the shared object instead of compiling again. The cache folder is
// $TRAINRUN_KERNEL_CACHE, else $XDG_CACHE_HOME/trainrun/kernels, else
// ~/.cache/trainrun/kernels; the compiler is $CXX, else g++.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace trainrun::compile {

// Compiles `source` into the shared object `output` (written whole, then
// renamed in). Throws ValueError with the compiler's message when it fails
// or runs past `timeout`.
void compile_shared_object(const std::string& source, const std::filesystem::path& output,
                           std::chrono::seconds timeout = std::chrono::seconds(120));

// The folder generated kernels are cached in (every device's), and the stable hash that names them.
std::filesystem::path kernel_cache_dir();
uint64_t stable_hash(const std::string& s);

class KernelLibrary {
 public:
  // Compiles (or finds in the cache) and loads `source`. Throws ValueError
  // with the compiler's message when it fails, or when it runs past `timeout`.
  static std::shared_ptr<KernelLibrary> load(const std::string& source,
                                             std::chrono::seconds timeout = std::chrono::seconds(120));
  // Loads a shared object compiled earlier (an AOT package's model.so).
  static std::shared_ptr<KernelLibrary> open(const std::string& path);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // The extern "C" function `name`; throws ValueError when it has none.
  void* symbol(const std::string& name) const;
  const std::string& path() const { return path_; }
  bool compiled_now() const { return compiled_now_; }  // false: found in the cache

  // The flags generated kernels are compiled with: the eager kernels' (copts.bzl).
  static const char* flags();

 private:
  KernelLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
  bool compiled_now_ = false;
};

}  // namespace trainrun::compile
