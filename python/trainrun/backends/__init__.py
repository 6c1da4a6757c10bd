"""trainrun.backends: the switches PyTorch scripts set at their top
(`torch.backends.cudnn.benchmark = True`, `...deterministic = True`,
`torch.backends.cuda.matmul.allow_tf32 = True`).

cudnn's flags are kept and read back; trainrun's convolutions do not use
cuDNN (oneDNN on the CPU, im2col on CUDA), whose algorithms are already
deterministic and not autotuned, so `benchmark` and `deterministic` change
nothing. `cuda.matmul.allow_tf32` switches TF32 in cuBLAS matrix products."""
import types

from trainrun import cuda as _cuda


class _CudnnModule(types.ModuleType):
    enabled = True
    benchmark = False
    deterministic = False
    allow_tf32 = True
    benchmark_limit = 10

    @staticmethod
    def is_available():
        return False  # trainrun does not link cuDNN

    @staticmethod
    def version():
        return None

    def flags(self, enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
        """A context manager setting the flags inside and restoring them after, as PyTorch's."""
        import contextlib

        @contextlib.contextmanager
        def setting():
            names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
            saved = {n: getattr(self, n) for n in names}
            for n, v in zip(names, (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)):
                setattr(self, n, v)
            try:
                yield
            finally:
                for n, v in saved.items():
                    setattr(self, n, v)
        return setting()


cudnn = _CudnnModule("trainrun.backends.cudnn")
cuda = types.ModuleType("trainrun.backends.cuda")
cuda.matmul = _cuda.matmul
cuda.is_built = lambda: True


def _sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
    """torch.backends.cuda.sdp_kernel (the older form of nn.attention.sdpa_kernel): MATH must stay enabled."""
    from trainrun.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([SDPBackend.MATH] if enable_math else [SDPBackend.FLASH_ATTENTION])


cuda.sdp_kernel = _sdp_kernel
for _flag in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "cudnn_sdp_enabled"):
    setattr(cuda, _flag, lambda: False)
cuda.math_sdp_enabled = lambda: True
for _flag in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_math_sdp", "enable_cudnn_sdp"):
    setattr(cuda, _flag, lambda enabled: None)  # (one kernel: nothing to switch)
mkldnn = types.ModuleType("trainrun.backends.mkldnn")
mkldnn.is_available = lambda: True  # oneDNN runs the CPU convolutions
mkldnn.enabled = True
mps = types.ModuleType("trainrun.backends.mps")
mps.is_available = lambda: False
mps.is_built = lambda: False
openmp = types.ModuleType("trainrun.backends.openmp")
openmp.is_available = lambda: False  # trainrun's own thread pool does the parallel work


def _register():
    import sys
    for name, module in (("cudnn", cudnn), ("cuda", cuda), ("mkldnn", mkldnn), ("mps", mps), ("openmp", openmp)):
        sys.modules[f"trainrun.backends.{name}"] = module


_register()
