"""IPPO: independent PPO for cooperative multi-agent games (de Witt et al., 2020, "Is
Independent Learning All You Need in the StarCraft Multi-Agent Challenge?", arXiv:2011.09533).

MAPPO (rlox/algorithms/mappo.py) with one change: each critic sees only the agent's own
observation (plus, when the group shares networks, its one-hot id), never the global state,
so actors and critics are both decentralised. One critic per group of agents that share
spaces (per agent without ``share_policy``). Collection, GAE, ValueNorm, masking and the
update are MAPPO's.

    ippo = IPPO("spread_v3", n_agents=3, seed=0)
    ippo.train(total_timesteps=100_000)
"""
from __future__ import annotations

import torch
from torch import nn

from rlox.algorithms.mappo import MAPPO
from rlox.config import IPPOConfig
from rlox.policies import mlp

__all__ = ["IPPO"]


class IPPO(MAPPO):
    """Independent PPO: MAPPO with decentralised critics V(o_i, id). Arguments as ``MAPPO``."""

    name = "ippo"
    config_class = IPPOConfig
    centralised_critic = False

    def _critic_in(self, g: int) -> int:
        return self._actor_in(g)            # the agent's own observation (+ id when shared)

    def _make_critics(self) -> nn.ModuleList:
        cfg = self.config
        return nn.ModuleList(mlp(self._critic_in(g), cfg.hidden, 1, cfg.activation, out_gain=1.0,
                                 ortho_init=cfg.ortho_init) for g in range(len(self.groups)))

    def _critic_of(self, g: int) -> nn.Module:
        return self.critics[g]

    def _critic_input(self, obs: torch.Tensor, state: torch.Tensor, g: int) -> torch.Tensor:
        return self._actor_input(obs, g)
