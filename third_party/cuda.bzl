"""cuda_library: .cu files compiled by nvcc, wrapped in a cc_library."""

# sm_80 (A100) and sm_90 (H100/H200) machine code, plus sm_90 PTX so that
# newer GPUs can JIT it.
_NVCC_FLAGS = " ".join([
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-Xcompiler -fPIC",
    "-Xcompiler -O3",
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=[sm_90,compute_90]",
    "-diag-suppress=186",
    "-I.",
    "-I/usr/local/cuda/include/cccl",
])

def cuda_library(name, srcs, hdrs = [], cu_deps = [], deps = [], **kwargs):
    """Compiles each of `srcs` (.cu) with nvcc into an object of a cc_library.

    `cu_deps` are the headers the .cu files include (they must be listed:
    nvcc runs in Bazel's sandbox, outside cc rules).
    """
    objs = []
    for src in srcs:
        obj = name + "_objs/" + src.replace(".cu", ".o")
        native.genrule(
            name = name + "_nvcc_" + src.replace("/", "_").replace(".", "_"),
            srcs = [src] + cu_deps,
            outs = [obj],
            cmd = "/usr/local/cuda/bin/nvcc %s -c $(location %s) -o $@" % (_NVCC_FLAGS, src),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart_static"],
        **kwargs
    )
