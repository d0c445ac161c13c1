"""Thread control for the kernels.

Every kernel module keeps its own thread count (a C int read without the GIL);
``set_num_threads`` sets it on all of them. ``RLOX_NUM_THREADS`` gives the starting value.
OpenMP kernels split independent rows (envs, sequences, samples) across that many threads, so
results never depend on the thread count; PPO's compiled update (``rlox._ext.ppo_update``)
limits the BLAS to ``min(blas_threads, count)`` threads for each call, through threadpoolctl.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import rlox._ext as _ext_pkg

_modules: list[ModuleType] | None = None
_current: int | None = None


def _kernel_modules() -> list[ModuleType]:
    global _modules
    if _modules is None:
        found = []
        for info in pkgutil.iter_modules(_ext_pkg.__path__):
            mod = importlib.import_module(f"rlox._ext.{info.name}")
            if hasattr(mod, "_set_num_threads"):
                found.append(mod)
        _modules = found
    return _modules


def set_num_threads(n: int) -> None:
    """Set the number of threads every rlox kernel uses (n >= 1): OpenMP threads, and the cap
    on the BLAS threads of the PPO update kernel."""
    global _current
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads expects an int >= 1, got {n!r} ({type(n).__name__})")
    if n < 1:
        raise ValueError(f"set_num_threads expects n >= 1, got {n}; use 1 for serial kernels")
    for mod in _kernel_modules():
        mod._set_num_threads(n)
    _current = n


def get_num_threads() -> int:
    """The number of OpenMP threads rlox kernels use."""
    if _current is not None:
        return _current
    mods = _kernel_modules()
    return mods[0]._get_num_threads() if mods else 1


def openmp_enabled() -> bool:
    """True when the kernels were compiled with OpenMP (otherwise they run serially)."""
    mods = _kernel_modules()
    return bool(mods) and all(m._openmp_enabled() for m in mods)
