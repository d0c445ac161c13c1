"""rlox's algorithms, one file each, readable top to bottom.

    from rlox.algorithms import PPO, A2C, VPG, TRPO, SAC, TD3, DQN
    from rlox.algorithms.hybrid_ppo import HybridPPO

Names are imported on first use (``from rlox.algorithms import PPO`` imports only ppo.py). The
algorithm names come from the package's ``rlox.algorithms`` entry points (``rlox._builtins``),
which also register the classes in ``rlox.plugins.ALGORITHM_REGISTRY``, so
``Trainer("ppo", ...)`` finds them like any plugin; only the shared base classes are listed here.
"""
from __future__ import annotations

from rlox._builtins import builtin_algorithms, lazy_module

# The base classes algorithms build on (not algorithms themselves, so not entry points).
_BASES = {
    "Algorithm": "rlox.algorithms.base",
    "OnPolicyAlgorithm": "rlox.algorithms.on_policy",
    "OffPolicyAlgorithm": "rlox.algorithms.off_policy",
    "OfflineAlgorithm": "rlox.algorithms.offline",
    "LLMAlgorithm": "rlox.algorithms.llm_base",
}

__getattr__, __dir__ = lazy_module(__name__, _BASES, lambda: {a.cls: a.module for a in builtin_algorithms()})
