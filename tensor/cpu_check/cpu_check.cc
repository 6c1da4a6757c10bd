// The tensor core is compiled for x86-64-v3 (AVX2 + FMA). On an older CPU
// its first vector instruction would die with SIGILL; this check runs
// before any other static initialiser and says why instead.
#include <cstdio>
#include <cstdlib>

namespace {

__attribute__((constructor(101))) void require_avx2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr,
                 "trainrun: this CPU lacks AVX2/FMA; the tensor core is built for x86-64-v3 "
                 "(Intel Haswell / AMD Excavator or newer)\n");
    std::abort();
  }
#endif
}

}  // namespace
