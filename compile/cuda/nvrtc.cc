#include "compile/cuda/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "base/error.h"

namespace trainrun::compile::cuda {
namespace {

// The NVRTC functions this file calls, looked up once.
struct Nvrtc {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  std::string missing;  // why it could not be opened ("" when it was)
};

template <typename F>
bool find(void* handle, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  return *fn != nullptr;
}

const Nvrtc& nvrtc() {
  static const Nvrtc lib = [] {
    Nvrtc n;
    std::vector<std::string> paths = {"libnvrtc.so.13", "libnvrtc.so"};
    if (const char* home = std::getenv("CUDA_HOME"); home && *home)
      paths.push_back(std::string(home) + "/lib64/libnvrtc.so");
    paths.push_back("/usr/local/cuda/lib64/libnvrtc.so");
    void* handle = nullptr;
    std::string errors;
    for (const std::string& p : paths) {
      handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
      const char* e = dlerror();
      errors += fmt::format("\n  {}: {}", p, e ? e : "not found");
    }
    if (handle == nullptr) {
      n.missing = "cannot open NVRTC (the CUDA toolkit's libnvrtc):" + errors;
      return n;
    }
    const bool all =
        find(handle, "nvrtcVersion", &n.version) && find(handle, "nvrtcGetErrorString", &n.error_string) &&
        find(handle, "nvrtcCreateProgram", &n.create) && find(handle, "nvrtcDestroyProgram", &n.destroy) &&
        find(handle, "nvrtcCompileProgram", &n.compile) && find(handle, "nvrtcGetProgramLogSize", &n.log_size) &&
        find(handle, "nvrtcGetProgramLog", &n.log) && find(handle, "nvrtcGetCUBINSize", &n.cubin_size) &&
        find(handle, "nvrtcGetCUBIN", &n.cubin);
    if (!all) n.missing = "the NVRTC library found lacks functions this build calls (nvrtcGetCUBIN needs CUDA 11.1+)";
    return n;
  }();
  return lib;
}

const Nvrtc& checked() {
  const Nvrtc& n = nvrtc();
  TR_CHECK(n.missing.empty(), ValueError, "{}", n.missing);
  return n;
}

}  // namespace

bool nvrtc_available(std::string* reason) {
  const Nvrtc& n = nvrtc();
  if (reason != nullptr) *reason = n.missing;
  return n.missing.empty();
}

std::string nvrtc_version() {
  const Nvrtc& n = checked();
  int major = 0, minor = 0;
  n.version(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::string nvrtc_compile(const std::string& source, const std::string& arch, const std::string& what) {
  const Nvrtc& n = checked();
  nvrtcProgram program = nullptr;
  nvrtcResult rc = n.create(&program, source.c_str(), (what + ".cu").c_str(), 0, nullptr, nullptr);
  TR_CHECK(rc == NVRTC_SUCCESS, ValueError, "NVRTC cannot take {}: {}", what, n.error_string(rc));
  // Deleted however this function leaves.
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> owner(&program, [](nvrtcProgram* p) {
    nvrtc().destroy(p);
  });
  const std::string arch_flag = "--gpu-architecture=" + arch;
  // IEEE division and square root, denormals kept: the eager kernels are built without fast math too.
  const char* options[] = {arch_flag.c_str(), "--std=c++17", "-DNDEBUG"};
  rc = n.compile(program, 3, options);
  if (rc != NVRTC_SUCCESS) {
    size_t size = 0;
    n.log_size(program, &size);
    std::string log(size, '\0');
    if (size > 0) n.log(program, log.data());
    TR_CHECK(false, ValueError, "NVRTC failed on {} for {}: {}\n{}", what, arch, n.error_string(rc),
             log.substr(0, 4000));
  }
  size_t size = 0;
  n.cubin_size(program, &size);
  std::string cubin(size, '\0');
  n.cubin(program, cubin.data());
  return cubin;
}

}  // namespace trainrun::compile::cuda
