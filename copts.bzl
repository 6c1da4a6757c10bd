"""Compiler options shared by packages whose loops run over every byte.

The baseline is x86-64-v3 (AVX2 + FMA, every x86 server since 2013); the
tensor core's cpu_check refuses older CPUs with a message instead of SIGILL.
GCC 12's -O2 vectorizes only loops without epilogues, so these use -O3. Used by
the tensor kernels and by c10d's reductions (every byte of a collective)."""

VECTORIZED_COPTS = [
    "-O3",
    "-mavx2",
    "-mfma",
]
