"""torch._inductor.config: Inductor's code generation settings, which PyTorch scripts set before torch.compile.
trainrun's generated loops (compile/pointwise_codegen.h) take none of them: each is accepted as a plain attribute
with PyTorch's default, readable and patchable (`config.patch(...)`), and changes nothing trainrun does."""
import sys as _sys
import types as _types

from trainrun._config_patch import patcher as _patcher

max_autotune = False
max_autotune_gemm = False
max_autotune_pointwise = False
coordinate_descent_tuning = False
epilogue_fusion = True
pattern_matcher = True
freezing = False
fx_graph_cache = True
fx_graph_remote_cache = None
force_disable_caches = False
debug = False
trace = _types.SimpleNamespace(enabled=False, graph_diagram=False)
triton = _types.SimpleNamespace(cudagraphs=False, unique_kernel_names=False, cudagraph_trees=True,
                                descriptive_names="original_aten")
cpp = _types.SimpleNamespace(simdlen=None, threads=-1, enable_kernel_profile=False, dynamic_threads=False)
aot_inductor = _types.SimpleNamespace(output_path="", debug_compile=False, package=False)

patch = _patcher(_sys.modules[__name__])
