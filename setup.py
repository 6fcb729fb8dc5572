"""The ``mnemon`` distribution: one import namespace, packages discovered, native accelerators.

Layout (decision 0208): the four top-level folders of the repository install as
``mnemon.session``, ``mnemon.lineage``, ``mnemon.providers`` and ``mnemon.orchestrator``;
``src/mnemon`` holds only the face (``mnemon/__init__.py``, ``__main__.py``). Every subpackage
below the four is found by ``find_namespace_packages`` (any folder of ``.py`` files), never
listed by hand, so a new one cannot be left out of the wheel.

Native accelerators, built by setuptools with the machine's C compiler: BLAKE3 over many
records, the raw-JSON literal scan of the door's grep, the OTLP span encoder of live tracing.

All are optional at run time: ``session.native`` and ``orchestrator.tracing.protobuf`` fall
back to pure Python when they are missing, and the tests run both paths. BLAKE3 is upstream's C implementation, vendored in
``third_party/blake3`` (CC0-1.0 or Apache-2.0); its SIMD kernels are chosen at run time.
"""

import platform

import os

from setuptools import Extension, find_packages, setup

TOP = ("session", "lineage", "providers", "orchestrator")
CODE = (".py", ".pyc", ".so", ".pyd", ".c", ".h")


def discover() -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    """Packages (every folder with ``__init__.py``), their directories, and their data: every
    other file below a package that is not code belongs to the nearest package above it."""
    packages, package_dir, data = ["mnemon"], {"mnemon": "src/mnemon"}, {"mnemon": ["py.typed"]}
    for top in TOP:
        package_dir[f"mnemon.{top}"] = top
        packages += [f"mnemon.{top}"] + [f"mnemon.{top}.{p}" for p in find_packages(top)]
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = folder.split(os.sep)
            owner = next(rel[:i] for i in range(len(rel), 0, -1)
                         if os.path.isfile(os.path.join(*rel[:i], "__init__.py")))
            name = "mnemon." + ".".join(owner)
            inner = rel[len(owner):]
            data.setdefault(name, []).extend(
                "/".join([*inner, f]) for f in sorted(files) if not f.endswith(CODE))
    return packages, package_dir, {k: v for k, v in data.items() if v}


def write_version() -> None:
    """``src/mnemon/_version.py`` from ``pyproject.toml``'s version, at every build (wheel, sdist,
    editable): ``mnemon --version`` and ``mnemon.__version__`` read this constant instead of the
    installed metadata, whose import costs ~40 ms of a 50 ms start. Written only when it
    changes; never committed (``.gitignore``), so the two cannot disagree."""
    import tomllib

    with open("pyproject.toml", "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    text = ('"""The version, written by setup.py from pyproject.toml at build time."""\n\n'
            f'__version__ = "{version}"\n')
    path = os.path.join("src", "mnemon", "_version.py")
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


write_version()
packages, package_dir, package_data = discover()

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
    packages=packages,
    package_dir=package_dir,
    package_data=package_data,
    ext_modules=[
        Extension("mnemon.session._b3many", sources=["native/b3many.c", *b3_sources],
                  include_dirs=[B3], define_macros=b3_macros, extra_compile_args=CFLAGS,
                  optional=True),
        Extension("mnemon.session._scan", sources=["native/scan.c"], extra_compile_args=CFLAGS,
                  optional=True),
        Extension("mnemon.orchestrator.tracing._otlp",
                  sources=["native/otlp.c", "native/otlp_build.c"], depends=["native/otlp_wire.h"],
                  extra_compile_args=CFLAGS, optional=True),
    ],
)
