"""Build the Cython kernels: every ``ext/<name>.pyx`` becomes ``rlox._ext.<name>``.

Compiler directives are set once, here. Environment switches:

* ``RLOX_CYTHON_DEBUG=1``  build with boundscheck/initializedcheck on (for debugging kernels).
* ``RLOX_NO_OPENMP=1``     build without OpenMP (kernels then run serially).
* ``RLOX_ONLY=a,b``        build only these extension modules (developer convenience).
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

HERE = Path(__file__).parent.resolve()
DEBUG = os.environ.get("RLOX_CYTHON_DEBUG", "0") not in ("", "0")


def _openmp_flags():
    """Return (compile_args, link_args) for OpenMP, or empty lists when the compiler lacks it."""
    if os.environ.get("RLOX_NO_OPENMP", "0") not in ("", "0"):
        print("rlox: RLOX_NO_OPENMP set; building without OpenMP (kernels run serially)")
        return [], []
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc.split()[0]) is None:
        print(f"rlox: compiler {cc!r} not found for the OpenMP probe; building without OpenMP")
        return [], []
    src = "#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c_file = Path(tmp) / "probe.c"
        c_file.write_text(src)
        probe = subprocess.run(
            cc.split() + ["-fopenmp", str(c_file), "-o", str(Path(tmp) / "probe")],
            capture_output=True,
        )
    if probe.returncode != 0:
        print("rlox: the C compiler does not support -fopenmp; building without OpenMP "
              "(kernels run serially)")
        return [], []
    return ["-fopenmp"], ["-fopenmp"]


# Per-module extra compile flags. frames: no fused multiply-add, so its float32 sums round as
# OpenCV's INTER_AREA does (bit-exact results; see rlox/_ext/frames.pxd).
EXTRA_COMPILE_ARGS = {"frames": ["-ffp-contract=off"]}


def _extensions():
    omp_compile, omp_link = _openmp_flags()
    only = {n for n in os.environ.get("RLOX_ONLY", "").split(",") if n}
    opt = ["-O0", "-g"] if DEBUG else ["-O3"]
    exts = []
    for pyx in sorted((HERE / "ext").glob("*.pyx")):
        name = pyx.stem
        if only and name not in only:
            continue
        exts.append(Extension(
            f"rlox._ext.{name}",
            [os.path.relpath(pyx, HERE)],
            include_dirs=[np.get_include(), "ext", "."],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=opt + omp_compile + EXTRA_COMPILE_ARGS.get(name, []),
            extra_link_args=omp_link + ["-lm"],
        ))
    return exts


DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": False,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "nonecheck": False,
    "embedsignature": True,
}

setup(
    ext_modules=cythonize(
        _extensions(),
        compiler_directives=DIRECTIVES,
        # ext/ for the kernels' .pxd files; the root for rlox/_ext/buffers.pxd, the contract
        # other modules cimport as rlox._ext.buffers (see that file)
        include_path=["ext", str(HERE)],
        quiet=True,
        # Directives are not part of cythonize's staleness check: a debug build (and the
        # normal build after it) must regenerate the C, or boundscheck silently stays off.
        force=DEBUG or os.environ.get("RLOX_CYTHON_FORCE", "0") not in ("", "0"),
        nthreads=0 if sys.platform == "win32" else 1,
    ),
)
