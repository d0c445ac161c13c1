"""rlox's algorithms, one file each, readable top to bottom.

    from rlox.algorithms import PPO, A2C, VPG, TRPO, SAC, TD3, DQN
    from rlox.algorithms.hybrid_ppo import HybridPPO

Names are imported on first use (``from rlox.algorithms import PPO`` imports only ppo.py).
The same classes are registered in ``rlox.plugins.ALGORITHM_REGISTRY`` through the package's
``rlox.algorithms`` entry points, so ``Trainer("ppo", ...)`` finds them like any plugin.
"""
from __future__ import annotations

import importlib

_MODULES = {
    "Algorithm": "base",
    "OnPolicyAlgorithm": "on_policy",
    "PPO": "ppo",
    "A2C": "a2c",
    "VPG": "vpg",
    "TRPO": "trpo",
    "HybridPPO": "hybrid_ppo",
    "OffPolicyAlgorithm": "off_policy",
    "SAC": "sac",
    "TD3": "td3",
    "DQN": "dqn",
    "MAPPO": "mappo",
    "IPPO": "ippo",
    "OfflineAlgorithm": "offline",
    "TD3BC": "td3_bc",
    "IQL": "iql",
    "CQL": "cql",
    "BC": "bc",
    "IMPALA": "impala",
    "RecurrentPPO": "recurrent_ppo",
    "DreamerV3": "dreamer_v3",
    "LLMAlgorithm": "llm_base",
    "GRPO": "grpo",
    "DPO": "dpo",
    "OnlineDPO": "online_dpo",
}

__all__ = list(_MODULES)


def __getattr__(name: str):
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'rlox.algorithms' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rlox.algorithms.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_MODULES))
