"""HybridPPO: PPO with its compiled rollout collection required (the guide's name for it).

Since issue 18 every on-policy algorithm (PPO, A2C, VPG, TRPO) collects in compiled code by
default wherever the kernel can run (``compiled_collection``, see
``rlox.algorithms._compiled_collection``), and PPO updates in compiled code by default on a
CPU (``compiled_update``, see ``rlox.algorithms._compiled_update``). ``HybridPPO`` is
``PPO(compiled_collection=True)``: the same class, config, checkpoints and results, plus a
ValueError at construction (rather than a quiet torch fallback) where the kernel cannot run,
and ``timing_summary()``.

    from rlox.algorithms.hybrid_ppo import HybridPPO
    ppo = HybridPPO(env_id="CartPole-v1", n_envs=16, hidden=64)
    metrics = ppo.train(total_timesteps=100_000)
    ppo.timing_summary()          # {'collection_pct': ..., 'training_pct': ...}

Limits (the compiled collection's): native envs only (``rlox.NATIVE_ENV_IDS``), the default
Tanh MLP policy, no gSDE, no observation/reward normalisation or wrappers, no
``rollout_episodes``; the compiled update needs ``device="cpu"``.
"""
from __future__ import annotations

from typing import Any

from rlox.algorithms.ppo import PPO
from rlox.envs import NATIVE_ENV_IDS, is_native

__all__ = ["HybridPPO"]


class HybridPPO(PPO):
    """PPO with compiled rollout collection (required) and a compiled update, on the native envs.

    Args:
        env_id: a native env id (one of ``rlox.NATIVE_ENV_IDS``).
        compiled_update: as for ``PPO`` (a ``PPOConfig`` field): the update in
            ``PPOUpdateKernel`` (True) or with PPO's torch update (False); default: True on
            a CPU ``device``, False elsewhere. Also a property that can be switched between
            ``train`` calls.
        n_envs, hidden, ...: ``PPOConfig`` fields, as for ``PPO``; ``compiled_collection`` is
            True (passing False is a ValueError: that is ``PPO(compiled_collection=False)``).
        seed, callbacks, logger, device: see ``Algorithm``.
    """

    name = "hybrid_ppo"

    def __init__(self, env_id: Any = "CartPole-v1", **kwargs: Any) -> None:
        if kwargs.get("compiled_collection") is False:
            raise ValueError("HybridPPO always collects in compiled code; for the torch collection use "
                             "PPO(..., compiled_collection=False)")
        if not is_native(env_id):
            raise ValueError(f"HybridPPO runs the native envs only ({', '.join(NATIVE_ENV_IDS)}); got "
                             f"{env_id!r}. Use PPO for other envs")
        kwargs["compiled_collection"] = True
        super().__init__(env_id, **kwargs)     # a ValueError names anything else the kernel cannot run

    @property
    def compiled(self) -> Any:
        """The compiled collection policy (``rlox._ext.hybrid.CompiledPolicy``)."""
        return self.compiled_collector.policy

    @property
    def kernel(self) -> Any:
        """The rollout kernel (``rlox._ext.hybrid.RolloutKernel``)."""
        return self.compiled_collector.kernel
