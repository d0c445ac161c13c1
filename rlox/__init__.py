"""rlox: reinforcement learning with Cython kernels under small PyTorch modules.

The low-level primitives (native envs, GAE/V-trace, running statistics, replay buffers,
LLM kernels) are re-exported here; algorithms live in ``rlox.algorithms``.
"""
import os as _os

# OpenMP workers that spin while waiting steal the core from whoever else runs on the machine, and
# a parallel region then waits a whole scheduler slice for them (measured here: a 16-env Acrobot
# step went from 13 us to 2.5 ms on a busy 2-core machine). Sleeping workers cost a few
# microseconds to wake instead. This must be set before the first kernel loads the OpenMP
# runtime; set OMP_WAIT_POLICY yourself to override it.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from rlox._threads import get_num_threads, openmp_enabled, set_num_threads  # noqa: E402
from rlox.errors import RloxWarning

from rlox.envs import *  # noqa: F401,F403
from rlox.advantages import *  # noqa: F401,F403
from rlox.stats import *  # noqa: F401,F403
from rlox.buffers import *  # noqa: F401,F403
from rlox.llm import *  # noqa: F401,F403

from rlox import advantages as _adv, buffers as _buf, envs as _envs, llm as _llm, stats as _stats

__version__ = "0.1.0"

# Names that pull in torch are imported on first use, so `import rlox` stays light. Each maps to
# the module that defines it; the algorithms (rlox.PPO) and their named trainers (rlox.PPOTrainer)
# are added from the package's ``rlox.algorithms`` entry points on first lookup (rlox._builtins).
_LAZY: dict[str, str] = {
    "Trainer": "rlox.trainer",
    "MultiAgentVecEnv": "rlox.multiagent.envs",
    "collect_dataset": "rlox.offline",
    "normalized_score": "rlox.offline",
}
_EAGER_ALL = [
    "__version__", "set_num_threads", "get_num_threads", "openmp_enabled", "RloxWarning",
    *_envs.__all__, *_adv.__all__, *_stats.__all__, *_buf.__all__, *_llm.__all__,
]


def _lazy_names() -> dict[str, str]:
    from rlox._builtins import builtin_algorithms

    names = dict(_LAZY)
    for algo in builtin_algorithms():
        names[algo.cls] = algo.module
        if algo.trainer is not None:
            names[algo.trainer] = "rlox.trainer"
    return names


def __getattr__(name: str):
    if name == "__all__":
        value = [*_EAGER_ALL, *_lazy_names()]
    else:
        module = _LAZY.get(name) or (None if name.startswith("_") else _lazy_names().get(name))
        if module is None:
            raise AttributeError(f"module 'rlox' has no attribute {name!r}")
        import importlib
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_lazy_names()))
