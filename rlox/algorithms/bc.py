"""Behavioural cloning: supervised learning of the dataset's actions (Pomerleau, 1991).

    from rlox.algorithms.bc import BC
    algo = BC(dataset=buf, obs_dim=17, act_dim=6)                   # deterministic, MSE
    algo = BC(dataset=buf, obs_dim=17, act_dim=6, policy="gaussian")  # Gaussian log-likelihood
    algo = BC(dataset=buf, obs_dim=4, act_dim=2, action_space=gymnasium.spaces.Discrete(2))
    algo.train(n_gradient_steps=10_000)

The baseline every offline method is compared with (and, on expert data, hard to beat).
Continuous: a tanh actor fitted by mean squared error, or ``GaussianPolicy`` by maximum
likelihood; discrete: logits fitted by cross-entropy. Rewards and next observations are unused.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from rlox.algorithms.offline import Batch, OfflineAlgorithm
from rlox.config import BCConfig
from rlox.networks import DeterministicPolicy, GaussianPolicy, mlp, linear_layers, relu_mlp_forward
from rlox.optim import make_adam

__all__ = ["BC", "bc_loss"]


def bc_loss(kind: str, prediction: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """The cloning loss. ``"deterministic"``: ``mean (pi(s) - a)^2`` (``prediction`` [B, A]);
    ``"gaussian"``: ``-mean log pi(a|s)`` (``prediction`` is the log-likelihood [B]);
    ``"discrete"``: cross-entropy of logits [B, n] against integer actions [B]."""
    if kind == "deterministic":
        return F.mse_loss(prediction, actions)
    if kind == "gaussian":
        return -prediction.mean()
    if kind == "discrete":
        return F.cross_entropy(prediction, actions)
    raise ValueError(f"unknown BC loss {kind!r}; expected 'deterministic', 'gaussian' or 'discrete'")


class BC(OfflineAlgorithm):
    """Behavioural cloning. Args: see ``OfflineAlgorithm`` and ``rlox.config.BCConfig``
    (``policy``: "deterministic" or "gaussian" for continuous actions)."""

    name = "bc"
    config_class = BCConfig
    supports_discrete = True
    metric_names = ("bc_loss",)

    def _build(self) -> None:
        cfg, dev = self.config, self.device
        self.kind = "discrete" if self.discrete else cfg.policy
        if self.discrete:
            self.actor = mlp(self.obs_dim, cfg.hidden, self.act_dim).to(dev)          # logits
            self._layers = linear_layers(self.actor)
        elif cfg.policy == "gaussian":
            self.actor = GaussianPolicy(self.obs_dim, self.act_dim, cfg.hidden).to(dev)
        else:
            self.actor = DeterministicPolicy(self.obs_dim, self.act_dim, cfg.hidden, max_action=1.0).to(dev)
        self.actor_optimizer = make_adam(self.actor.parameters(), cfg.learning_rate)

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer}

    def _logits(self, obs: torch.Tensor) -> torch.Tensor:
        return relu_mlp_forward(obs, self._layers, last_activation=False)

    def _policy_action(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        if self.kind == "discrete":
            logits = self._logits(obs)
            if deterministic:
                return logits.argmax(-1)
            return torch.distributions.Categorical(logits=logits).sample()
        if self.kind == "gaussian":
            return self.actor.deterministic(obs) if deterministic else self.actor.sample(obs)
        return self.actor(obs)

    def _export_head(self) -> torch.nn.Sequential:
        if self.kind == "discrete":
            return torch.nn.Sequential(*self.actor)
        return torch.nn.Sequential(*self.actor.net, torch.nn.Tanh())

    def _train_step(self, batch: Batch) -> torch.Tensor:
        obs, actions = batch.obs, batch.actions
        if self.kind == "discrete":
            prediction = self._logits(obs)
        elif self.kind == "gaussian":
            prediction = self.actor.log_prob(obs, actions)
        else:
            prediction = self.actor(obs)
        loss = bc_loss(self.kind, prediction, actions)
        self.actor_optimizer.zero_grad()
        loss.backward()
        self.actor_optimizer.step()
        return loss.detach()[None]
