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
from rlox import _builtins

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


def _derived() -> dict[str, str]:
    names = {}
    for algo in _builtins.builtin_algorithms():
        names[algo.cls] = algo.module
        if algo.trainer is not None:
            names[algo.trainer] = "rlox.trainer"
    return names


__getattr__, __dir__ = _builtins.lazy_module(__name__, _LAZY, _derived, _EAGER_ALL)
