"""Native accelerators, built by setuptools with the machine's C compiler.

Both are optional at run time: ``session.native`` falls back to pure Python when they are
missing, and the tests run both paths. BLAKE3 is upstream's C implementation, vendored in
``third_party/blake3`` (CC0-1.0 or Apache-2.0); its SIMD kernels are chosen at run time.
"""

import platform

from setuptools import Extension, setup

B3 = "third_party/blake3/"
b3_sources = [B3 + "blake3.c", B3 + "blake3_dispatch.c", B3 + "blake3_portable.c"]
b3_macros = []
if platform.machine().lower() in ("x86_64", "amd64"):
    b3_sources += [f"native/blake3_{k}_target.c" for k in ("sse2", "sse41", "avx2", "avx512")]
else:
    b3_macros += [("BLAKE3_NO_SSE2", "1"), ("BLAKE3_NO_SSE41", "1"), ("BLAKE3_NO_AVX2", "1"),
                  ("BLAKE3_NO_AVX512", "1")]

CFLAGS = ["-O3", "-std=c11", "-fvisibility=hidden"]

setup(
    ext_modules=[
        Extension("session._b3many", sources=["native/b3many.c", *b3_sources],
                  include_dirs=[B3], define_macros=b3_macros, extra_compile_args=CFLAGS,
                  optional=True),
        Extension("session._scan", sources=["native/scan.c"], extra_compile_args=CFLAGS,
                  optional=True),
    ],
)
