// The CUDA backend of fused loops: builds a graph's CUDA loops into one
// NVRTC-compiled CUBIN (cached on disk by a hash of the source, the target
// and NVRTC's version), loads it with cudaLibraryLoadData and launches each
// loop on the current stream of its tensors' device.
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "base/error.h"
#include "compile/cuda/nvrtc.h"
#include "compile/cuda_loop_codegen.h"
#include "compile/device_loop.h"
#include "compile/fused_kernel.h"
#include "compile/kernel_library.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/runtime.h"
#include "tensor/cuda/stream.h"
#include "tensor/factories.h"

namespace trainrun::compile::cuda {
namespace {

namespace tcuda = ::trainrun::cuda;

// A loaded CUBIN, unloaded when the last loop using it goes.
class CudaModule {
 public:
  explicit CudaModule(const std::string& cubin) {
    TR_CUDA_CHECK(cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  }
  ~CudaModule() { cudaLibraryUnload(library_); }
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  cudaKernel_t kernel(const std::string& name) const {
    cudaKernel_t k = nullptr;
    TR_CUDA_CHECK(cudaLibraryGetKernel(&k, library_, name.c_str()));
    return k;
  }

 private:
  cudaLibrary_t library_ = nullptr;
};

class CudaLoop : public DeviceLoop {
 public:
  CudaLoop(std::shared_ptr<CudaModule> module, const std::string& name, CudaLoopShape shape)
      : module_(std::move(module)), shape_(std::move(shape)), kernel_(module_->kernel(name)) {
    if (shape_.column_sums > 0) columns_ = module_->kernel(name + "_columns");
  }

  void run(const FusedKernel& k, const std::vector<Tensor>& in, std::vector<Tensor>& out) const override {
    const int index = tcuda::device_index(k.device);
    tcuda::DeviceGuard guard(index);
    const TensorOptions options(DType::Float32, Device(DeviceType::CUDA, static_cast<int16_t>(index)));
    std::vector<Tensor> inputs;  // (numbers made float32 on the device live until the launch is queued)
    std::vector<void*> pointers;
    std::vector<float> values(in.size());  // numbers on the CPU, passed by value
    std::vector<void*> args;               // kernelParams: where each parameter's value is
    for (size_t i = 0; i < in.size(); ++i) {
      Tensor t = in[i];
      if (shape_.host_scalar[i]) {
        TR_CHECK(t.device().is_cpu() && t.numel() == 1, ValueError, "{}: input {} is not a number on the CPU",
                 k.name, i);
        values[i] = FusedKernel::scalar_value(t);
        continue;
      }
      if (k.inputs[i] == FusedKernel::InputKind::Scalar) {
        if (t.dtype() != DType::Float32) t = t.to(DType::Float32);
        if (!t.device().is_cuda() || t.device().index != index) t = t.to(options.device);
      } else {
        // The recording checked these; a replay's inputs pass the same guards, so this only catches a bug.
        TR_CHECK(t.dtype() == DType::Float32 && t.is_contiguous() && t.device().is_cuda() &&
                     t.device().index == index, ValueError,
                 "{}: input {} is not a contiguous float32 tensor on cuda:{}", k.name, i, index);
      }
      inputs.push_back(t);
    }
    pointers.reserve(in.size() + k.output_sizes.size());  // (stable: args point into it)
    for (size_t i = 0, next = 0; i < in.size(); ++i) {
      if (shape_.host_scalar[i]) {
        args.push_back(&values[i]);
      } else {
        pointers.push_back(inputs[next++].data_ptr());
        args.push_back(&pointers.back());
      }
    }
    out.clear();
    for (const IntList& sizes : k.output_sizes) {
      out.push_back(empty(sizes, options));
      pointers.push_back(out.back().data_ptr());
      args.push_back(&pointers.back());
    }
    long long rows = k.rows, cols = k.cols;
    const cudaStream_t stream = tcuda::current_stream(index).handle();
    if (!shape_.by_row) {
      const long long n = rows * cols;
      if (n == 0) return;
      void* work = nullptr;
      args.insert(args.end(), {&work, &rows, &cols});
      const unsigned blocks = static_cast<unsigned>(std::min<long long>((n + 255) / 256, 8192));
      TR_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(blocks), dim3(256), args.data(), 0,
                                     stream));
      return;
    }
    // A block per row (at most 2048 blocks, striding over rows), its threads over the columns: a multiple of 32.
    const int blocks = static_cast<int>(std::max<long long>(1, std::min<long long>(rows, 2048)));
    const unsigned threads =
        static_cast<unsigned>(std::min<long long>(256, std::max<long long>(32, (cols + 31) / 32 * 32)));
    Tensor work;
    void* work_ptr = nullptr;
    if (const size_t n = shape_.work_floats(static_cast<size_t>(blocks), static_cast<size_t>(cols)); n > 0) {
      work = empty({static_cast<int64_t>(n)}, options);
      work_ptr = work.data_ptr();
    }
    args.insert(args.end(), {&work_ptr, &rows, &cols});
    TR_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(static_cast<unsigned>(blocks)),
                                   dim3(threads), args.data(), 0, stream));
    if (shape_.column_sums == 0) return;
    std::vector<void*> sums;
    for (size_t o : shape_.column_sum_outputs) sums.push_back(out.at(o).data_ptr());
    std::vector<void*> column_args = {&work_ptr};
    for (void*& p : sums) column_args.push_back(&p);
    int num_blocks = blocks;
    column_args.insert(column_args.end(), {&rows, &cols, &num_blocks});
    const unsigned column_blocks =
        static_cast<unsigned>(std::max<long long>(1, std::min<long long>((cols + 255) / 256, 4096)));
    TR_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(columns_), dim3(column_blocks), dim3(256),
                                   column_args.data(), 0, stream));
    // (work goes back to the caching allocator on this stream: the next user of its memory queues after these)
  }

 private:
  std::shared_ptr<CudaModule> module_;
  CudaLoopShape shape_;
  cudaKernel_t kernel_ = nullptr;
  cudaKernel_t columns_ = nullptr;
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The CUBIN of `source` for `arch`: from the kernel cache, or compiled now and written there (whole, then renamed).
std::string cached_cubin(const std::string& source, const std::string& arch) {
  const std::string key =
      fmt::format("{:016x}", stable_hash("nvrtc " + nvrtc_version() + "\n" + arch + "\n" + source));
  const std::filesystem::path dir = kernel_cache_dir();
  const std::filesystem::path file = dir / (key + "." + arch + ".cubin");
  if (std::filesystem::exists(file)) return read_file(file);
  const std::string cubin = nvrtc_compile(source, arch, "trainrun fused loops");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::filesystem::path tmp = dir / fmt::format("{}.{}.{}", file.filename().string(), getpid(),
                                                      std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream f(tmp, std::ios::binary);
    f << cubin;
  }
  std::filesystem::rename(tmp, file, ec);  // (a cache that cannot be written only costs a compile next time)
  if (ec) std::filesystem::remove(tmp, ec);
  return cubin;
}

class CudaLoopBackend : public DeviceLoopBackend {
 public:
  bool fits(const LoopPlan& plan, int64_t rows, int64_t cols) const override {
    return cuda_loop_fits(plan, rows, cols);
  }

  std::vector<std::shared_ptr<const DeviceLoop>> build(const std::vector<std::string>& names,
                                                       const std::vector<LoopPlan>& plans, Device device) override {
    std::string reason;
    TR_CHECK(nvrtc_available(&reason), ValueError, "{}", reason);
    const int index = tcuda::device_index(device);
    int major = 0, minor = 0;
    TR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
    TR_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
    std::string source = cuda_loops_prelude();
    for (size_t k = 0; k < plans.size(); ++k) source += cuda_loop_source(names[k], plans[k]);
    tcuda::DeviceGuard guard(index);
    auto module = std::make_shared<CudaModule>(cached_cubin(source, fmt::format("sm_{}{}", major, minor)));
    std::vector<std::shared_ptr<const DeviceLoop>> loops;
    for (size_t k = 0; k < plans.size(); ++k)
      loops.push_back(std::make_shared<CudaLoop>(module, names[k], cuda_loop_shape(plans[k])));
    return loops;
  }
};

const bool registered = [] {
  static CudaLoopBackend backend;
  register_device_loop_backend(DeviceType::CUDA, &backend);
  return true;
}();

}  // namespace
}  // namespace trainrun::compile::cuda
