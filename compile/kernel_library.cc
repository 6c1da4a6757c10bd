#include "compile/kernel_library.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "base/error.h"

extern char** environ;

namespace trainrun::compile {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs argv with stdout and stderr into `log`; kills it past the timeout. Returns the exit status.
int run_compiler(const std::vector<std::string>& args, const std::filesystem::path& log, std::chrono::seconds timeout) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  TR_CHECK(rc == 0, ValueError, "trainrun.compile: cannot start the C++ compiler '{}' ({}); set CXX to one",
           args[0], std::strerror(rc));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      TR_CHECK(false, ValueError, "trainrun.compile: the C++ compiler ran past {} s on generated kernels",
               timeout.count());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return cxx && *cxx ? cxx : "g++";
}

}  // namespace

// FNV-1a: stable across processes and builds (std::hash is not promised to be).
uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::filesystem::path kernel_cache_dir() {
  if (const char* d = std::getenv("TRAINRUN_KERNEL_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::filesystem::path(x) / "trainrun" / "kernels";
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "trainrun" / "kernels";
}

const char* KernelLibrary::flags() { return "-O3 -mavx2 -mfma -fno-math-errno -fPIC -shared"; }

void compile_shared_object(const std::string& source, const std::filesystem::path& output,
                           std::chrono::seconds timeout) {
  const std::filesystem::path dir = output.parent_path().empty() ? "." : output.parent_path();
  // Written under names of this process and renamed in: processes compiling the same kernels race harmlessly.
  const std::string tag = fmt::format("{}.{}.{}", output.filename().string(), getpid(),
                                      std::hash<std::thread::id>()(std::this_thread::get_id()));
  const std::filesystem::path src = dir / (tag + ".cc"), tmp = dir / (tag + ".so"), log = dir / (tag + ".log");
  std::error_code ec;
  {
    std::ofstream f(src);
    f << source;
    TR_CHECK(f.good(), ValueError, "trainrun.compile: cannot write {}", src.string());
  }
  std::vector<std::string> args = {compiler()};
  std::istringstream fl(KernelLibrary::flags());
  for (std::string w; fl >> w;) args.push_back(w);
  args.insert(args.end(), {"-o", tmp.string(), src.string(), "-lsleef"});
  const int status = run_compiler(args, log, timeout);
  if (status != 0) {
    const std::string message = read_file(log);
    std::filesystem::remove(tmp, ec);
    TR_CHECK(false, ValueError,
             "trainrun.compile: the C++ compiler failed on generated kernels ({} kept; exit {}):\n{}", src.string(),
             status, message.substr(0, 4000));
  }
  std::filesystem::remove(log, ec);
  std::filesystem::remove(src, ec);
  std::filesystem::rename(tmp, output, ec);
  TR_CHECK(!ec, ValueError, "trainrun.compile: cannot move compiled kernels to {}: {}", output.string(), ec.message());
}

std::shared_ptr<KernelLibrary> KernelLibrary::load(const std::string& source, std::chrono::seconds timeout) {
  const std::string key = fmt::format("{:016x}", stable_hash(compiler() + "\n" + flags() + "\n" + source));
  const std::filesystem::path dir = kernel_cache_dir();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TR_CHECK(!ec, ValueError, "trainrun.compile: cannot make the kernel cache folder {}: {}", dir.string(),
           ec.message());
  const std::filesystem::path so = dir / (key + ".so");
  bool compiled_now = false;
  if (!std::filesystem::exists(so)) {
    compile_shared_object(source, so, timeout);
    compiled_now = true;
  }
  std::shared_ptr<KernelLibrary> lib = open(so.string());
  lib->compiled_now_ = compiled_now;
  return lib;
}

std::shared_ptr<KernelLibrary> KernelLibrary::open(const std::string& path) {
  auto lib = std::shared_ptr<KernelLibrary>(new KernelLibrary());
  lib->path_ = path;
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TR_CHECK(lib->handle_ != nullptr, ValueError, "trainrun.compile: cannot load {}: {}", path, dlerror());
  return lib;
}

KernelLibrary::~KernelLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* KernelLibrary::symbol(const std::string& name) const {
  void* p = dlsym(handle_, name.c_str());
  TR_CHECK(p != nullptr, ValueError, "trainrun.compile: {} has no function {}", path_, name);
  return p;
}

}  // namespace trainrun::compile
