"""Actor-critic policies for the on-policy algorithms (PPO, A2C, VPG, TRPO).

Both policies hold two separate MLPs, ``actor`` and ``critic`` (``nn.Sequential`` of
``Linear`` + activation), orthogonally initialised as in the PPO implementation details
(gain sqrt(2) on hidden layers, 0.01 on the policy head, 1 on the value head).

Interface (what ``RolloutCollector`` and ``PPOLoss`` call); shapes ``B`` = batch:

    actions, log_probs = policy.get_action_and_logprob(obs)        # [B], [B]
    values = policy.get_value(obs)                                 # [B]
    log_probs, entropy = policy.get_logprob_and_entropy(obs, actions)
    actions, log_probs, values = policy.act(obs)                   # one call for collection
    log_probs, entropy, values = policy.evaluate_actions(obs, actions)   # one call for losses

Sampling takes an optional ``torch.Generator`` so algorithms keep their own random stream.
Distributions are written out (log-softmax, Gaussian log-density) rather than built from
``torch.distributions`` objects, which cost more Python time than the maths on small nets.
"""
from __future__ import annotations

import math
from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlox.networks import draw_categorical, draw_normal

__all__ = ["DiscretePolicy", "ContinuousPolicy", "GaussianPolicy", "mlp", "hidden_sizes", "make_policy",
           "SharedFeatures"]

_LOG_2PI = math.log(2 * math.pi)
_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def hidden_sizes(hidden: int | Sequence[int]) -> list[int]:
    """``64`` -> ``[64, 64]``; a list is used as it is."""
    if isinstance(hidden, bool):
        raise TypeError(f"hidden must be an int or a list of ints, got {hidden!r}")
    if isinstance(hidden, (int, np.integer)):
        if hidden < 1:
            raise ValueError(f"hidden must be >= 1, got {hidden}")
        return [int(hidden), int(hidden)]
    sizes = [int(h) for h in hidden]
    if not sizes or any(h < 1 for h in sizes):
        raise ValueError(f"hidden must be a non-empty list of ints >= 1, got {list(hidden)!r}")
    return sizes


def mlp(in_dim: int, hidden: int | Sequence[int], out_dim: int, activation: str = "tanh",
        out_gain: float = 1.0, ortho_init: bool = True) -> nn.Sequential:
    """Linear/activation stack ``in_dim -> hidden... -> out_dim`` (no activation on the output).

    With ``ortho_init``: orthogonal weights (gain sqrt(2) hidden, ``out_gain`` output), zero biases.
    """
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden_sizes(hidden):
        layers += [nn.Linear(last, h), _ACTIVATIONS[activation]()]
        last = h
    layers.append(nn.Linear(last, out_dim))
    if ortho_init:
        linears = [m for m in layers if isinstance(m, nn.Linear)]
        for i, lin in enumerate(linears):
            nn.init.orthogonal_(lin.weight, gain=out_gain if i == len(linears) - 1 else math.sqrt(2))
            nn.init.zeros_(lin.bias)
    return nn.Sequential(*layers)


class SharedFeatures(nn.Module):
    """A feature extractor (e.g. ``rlox.cnn.NatureCNN``) that the actor and the critic share, as
    SB3's CnnPolicy does: the output for the last input tensor is reused while the input and the
    weights are unchanged and no backward pass has gone through it, so ``act`` /
    ``evaluate_actions`` run the CNN once for both heads."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net
        self.features_dim = int(net.features_dim)
        self._cache: tuple | None = None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.is_inference() or torch.is_inference_mode_enabled():
            self._cache = None
            return self.net(obs)        # (inference tensors have no version counter to key on)
        first = next(self.net.parameters())
        key = (obs.data_ptr(), obs._version, tuple(obs.shape), first._version, torch.is_grad_enabled())
        if self._cache is not None and self._cache[0] is obs and self._cache[1] == key:
            return self._cache[2]
        out = self.net(obs)
        self._cache = (obs, key, out)
        if out.requires_grad:       # once a backward pass has used this graph, never hand it out again
            out.register_hook(self._forget)
        return out

    def _forget(self, grad: torch.Tensor) -> None:
        self._cache = None

    def inference_layers(self) -> list[nn.Module]:
        """The extractor itself, for ``rlox.artifacts`` (the cache is a training-time detail)."""
        return [self.net]


def _linear_head(features: SharedFeatures, out_dim: int, gain: float, ortho_init: bool) -> nn.Sequential:
    lin = nn.Linear(features.features_dim, out_dim)
    if ortho_init:
        nn.init.orthogonal_(lin.weight, gain=gain)
        nn.init.zeros_(lin.bias)
    return nn.Sequential(features, lin)


class _ActorCritic(nn.Module):
    """Shared parts: the critic and the convenience methods built on ``act``/``evaluate_actions``.

    With ``features`` (a CNN for image observations), actor and critic are linear heads on the
    shared features (SB3's CnnPolicy); ``hidden`` then is ``[features_dim]``.
    """

    discrete: bool

    def __init__(self, obs_dim: int, hidden: int | Sequence[int], activation: str, ortho_init: bool,
                 features: nn.Module | None = None, obs_shape: Sequence[int] | None = None):
        super().__init__()
        if isinstance(obs_dim, bool) or not isinstance(obs_dim, (int, np.integer)) or obs_dim < 1:
            raise ValueError(f"obs_dim must be an int >= 1, got {obs_dim!r}")
        self.obs_dim = int(obs_dim)
        # A multi-dimensional Box that is not an image (e.g. (3, 4) floats): the MLPs flatten it
        # (nn.Flatten first), as SB3's FlattenExtractor does.
        self.obs_shape = tuple(int(d) for d in obs_shape) if obs_shape is not None else (self.obs_dim,)
        if int(np.prod(self.obs_shape)) != self.obs_dim:
            raise ValueError(f"obs_shape {self.obs_shape} does not hold obs_dim={self.obs_dim} values")
        self.activation = activation
        self.features = SharedFeatures(features) if features is not None else None
        if self.features is not None:
            self.hidden = [self.features.features_dim]
            self.critic = _linear_head(self.features, 1, 1.0, ortho_init)
        else:
            self.hidden = hidden_sizes(hidden)
            self.critic = self._mlp(1, activation, 1.0, ortho_init)

    def _mlp(self, out_dim: int, activation: str, out_gain: float, ortho_init: bool) -> nn.Sequential:
        net = mlp(self.obs_dim, self.hidden, out_dim, activation, out_gain=out_gain, ortho_init=ortho_init)
        return nn.Sequential(nn.Flatten(), *net) if len(self.obs_shape) > 1 else net

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        """State values ``[B]``."""
        return self.critic(obs).squeeze(-1)

    def get_action_and_logprob(self, obs: torch.Tensor, deterministic: bool = False,
                               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Sampled (or greedy/mean) actions and their log-probabilities."""
        actions, log_probs, _ = self.act(obs, deterministic, generator, with_value=False)
        return actions, log_probs

    def get_logprob_and_entropy(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities ``[B]`` of ``actions`` and the policy's entropy ``[B]``."""
        log_probs, entropy, _ = self.evaluate_actions(obs, actions, with_value=False)
        return log_probs, entropy


class DiscretePolicy(_ActorCritic):
    """Categorical actor + value critic for ``Discrete(n_actions)`` action spaces.

    Args:
        obs_dim: observation size (flattened).
        n_actions: number of discrete actions.
        hidden: width of two hidden layers, or a list of widths.
        activation: "tanh" (default) or "relu".
        ortho_init: orthogonal initialisation (default True).
    """

    discrete = True

    def __init__(self, obs_dim: int, n_actions: int, hidden: int | Sequence[int] = 64,
                 activation: str = "tanh", ortho_init: bool = True, features: nn.Module | None = None,
                 obs_shape: Sequence[int] | None = None) -> None:
        super().__init__(obs_dim, hidden, activation, ortho_init, features, obs_shape)
        if isinstance(n_actions, bool) or not isinstance(n_actions, (int, np.integer)) or n_actions < 1:
            raise ValueError(f"n_actions must be an int >= 1, got {n_actions!r}")
        self.n_actions = int(n_actions)
        if self.features is not None:
            self.actor = _linear_head(self.features, self.n_actions, 0.01, ortho_init)
        else:
            self.actor = self._mlp(self.n_actions, activation, 0.01, ortho_init)

    def dist_params(self, obs: torch.Tensor) -> torch.Tensor:
        """Normalised log-probabilities of every action ``[B, n_actions]``."""
        return F.log_softmax(self.actor(obs), dim=-1)

    @staticmethod
    def kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """KL(old || new) per sample from two ``dist_params`` outputs."""
        return (old.exp() * (old - new)).sum(-1)

    def act(self, obs: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None,
            with_value: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(actions ``[B]`` int64, log_probs ``[B]``, values ``[B]`` or None)."""
        logp_all = self.dist_params(obs)
        if deterministic:
            actions = logp_all.argmax(-1)
        else:
            actions = draw_categorical(logp_all.exp(), generator)
        log_probs = logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return actions, log_probs, (self.get_value(obs) if with_value else None)

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor, with_value: bool = True
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(log_probs ``[B]``, entropy ``[B]``, values ``[B]`` or None) for given ``actions``."""
        logp_all = self.dist_params(obs)
        log_probs = logp_all.gather(-1, actions.long().reshape(-1, 1)).squeeze(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return log_probs, entropy, (self.get_value(obs) if with_value else None)

    def architecture(self) -> dict:
        return {"kind": "discrete", "obs_dim": self.obs_dim, "n_actions": self.n_actions,
                "hidden": list(self.hidden), "activation": self.activation}


class ContinuousPolicy(_ActorCritic):
    """Diagonal Gaussian actor + value critic for Box actions.

    Actions are unbounded samples; the collector clips them to the action space for the env
    and keeps the unclipped ones for the loss (as SB3 and CleanRL).

    Exploration noise, two kinds:

    * default: ``mean + exp(log_std) * N(0, 1)`` with a state-independent ``log_std [act_dim]``;
    * ``use_sde=True``: generalized state-dependent exploration (gSDE, Raffin et al., 2021,
      arXiv:2005.05719). The noise is ``z(s) @ E``, where ``z(s)`` are the actor's last hidden
      features (detached) and ``E [latent, act_dim]`` is drawn from ``N(0, exp(log_std)^2)``
      (``log_std [latent, act_dim]``) and kept for several steps (``reset_noise``), giving
      smooth exploration. The action's distribution is then ``N(mean, sigma(s))`` with
      ``sigma_k(s)^2 = sum_j z_j(s)^2 exp(2 log_std[j, k])``.

    Args:
        obs_dim: observation size (flattened).
        act_dim: action size (flattened).
        hidden: width of two hidden layers, or a list of widths.
        log_std_init: initial log standard deviation (of the noise weights with gSDE).
        use_sde: gSDE exploration (see above).
    """

    discrete = False
    _SDE_EPS = 1e-6

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 64,
                 activation: str = "tanh", ortho_init: bool = True, log_std_init: float = 0.0,
                 use_sde: bool = False, features: nn.Module | None = None,
                 obs_shape: Sequence[int] | None = None) -> None:
        super().__init__(obs_dim, hidden, activation, ortho_init, features, obs_shape)
        if isinstance(act_dim, bool) or not isinstance(act_dim, (int, np.integer)) or act_dim < 1:
            raise ValueError(f"act_dim must be an int >= 1, got {act_dim!r}")
        self.act_dim = int(act_dim)
        self.use_sde = bool(use_sde)
        if self.features is not None:
            self.actor = _linear_head(self.features, self.act_dim, 0.01, ortho_init)
        else:
            self.actor = self._mlp(self.act_dim, activation, 0.01, ortho_init)
        shape = (self.hidden[-1], self.act_dim) if self.use_sde else (self.act_dim,)
        self.log_std = nn.Parameter(torch.full(shape, float(log_std_init)))
        self.sde_noise: torch.Tensor | None = None     # [n, latent, act_dim] (gSDE only)

    # ------------------------------------------------------------------ distribution
    def _mean_latent(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean [B, act_dim], last hidden features [B, latent])."""
        x = obs
        layers = list(self.actor)
        for layer in layers[:-1]:
            x = layer(x)
        return layers[-1](x), x

    def _std(self, latent: torch.Tensor) -> torch.Tensor:
        """Per-sample std [B, act_dim]."""
        if self.use_sde:
            var = (latent.detach() ** 2) @ torch.exp(2 * self.log_std)
            return torch.sqrt(var + self._SDE_EPS)
        return self.log_std.exp().expand(latent.shape[0], self.act_dim)

    def reset_noise(self, n: int, generator: torch.Generator | None = None) -> None:
        """gSDE: draw ``n`` new noise matrices (one per env); a no-op without gSDE."""
        if not self.use_sde:
            return
        std = self.log_std.detach().exp()
        eps = draw_normal((int(n), *std.shape), generator, std)
        self.sde_noise = eps * std

    def dist_params(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, 2 * act_dim]``: the mean, then the log std."""
        mean, latent = self._mean_latent(obs)
        return torch.cat([mean, torch.log(self._std(latent))], dim=-1)

    @staticmethod
    def kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """KL(old || new) per sample for diagonal Gaussians given as ``dist_params``."""
        k = old.shape[-1] // 2
        mu0, ls0, mu1, ls1 = old[..., :k], old[..., k:], new[..., :k], new[..., k:]
        return (ls1 - ls0 + ((2 * ls0).exp() + (mu0 - mu1) ** 2) / (2 * (2 * ls1).exp()) - 0.5).sum(-1)

    @staticmethod
    def _log_prob(actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
        z = (actions - mean) / std
        return (-0.5 * z * z - torch.log(std) - 0.5 * _LOG_2PI).sum(-1)

    def act(self, obs: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None,
            with_value: bool = True) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(actions ``[B, act_dim]``, log_probs ``[B]``, values ``[B]`` or None)."""
        mean, latent = self._mean_latent(obs)
        std = self._std(latent)
        if deterministic:
            actions = mean
        elif self.use_sde:
            noise_w = self.sde_noise
            if noise_w is None or noise_w.shape[0] != mean.shape[0]:
                # No matrices for this batch size (e.g. a stochastic predict): one-off draws.
                eps = draw_normal((mean.shape[0], *self.log_std.shape), generator, mean)
                noise_w = eps * self.log_std.detach().exp()
            actions = mean + torch.bmm(latent.detach().unsqueeze(1), noise_w).squeeze(1)
        else:
            noise = draw_normal(mean.shape, generator, mean)
            actions = mean + noise * std
        return actions, self._log_prob(actions, mean, std), (self.get_value(obs) if with_value else None)

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor, with_value: bool = True
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        mean, latent = self._mean_latent(obs)
        std = self._std(latent)
        actions = actions.reshape(mean.shape)
        entropy = (0.5 + 0.5 * _LOG_2PI + torch.log(std)).sum(-1)
        return (self._log_prob(actions, mean, std), entropy,
                self.get_value(obs) if with_value else None)

    def architecture(self) -> dict:
        return {"kind": "gaussian", "obs_dim": self.obs_dim, "act_dim": self.act_dim,
                "hidden": list(self.hidden), "activation": self.activation, "use_sde": self.use_sde}


GaussianPolicy = ContinuousPolicy


def make_policy(observation_space: gym.Space, action_space: gym.Space, *, algorithm: str = "PPO",
                hidden: int | Sequence[int] = 64, activation: str = "tanh", ortho_init: bool = True,
                log_std_init: float = 0.0, use_sde: bool = False, features_extractor: str = "auto"
                ) -> _ActorCritic:
    """The policy for these spaces: ``DiscretePolicy`` for Discrete actions,
    ``ContinuousPolicy`` for Box actions; a clear error for anything else.

    ``features_extractor``: "auto" (a NatureCNN for uint8 image spaces, an MLP otherwise),
    "mlp", "nature" or "impala" (``rlox.cnn``); with a CNN the heads are linear on its features."""
    if not isinstance(observation_space, gym.spaces.Box):
        raise TypeError(f"{algorithm} needs a Box observation space (a flat vector or an array it "
                        f"flattens), got {observation_space}; wrap the env (e.g. "
                        f"gymnasium.wrappers.FlattenObservation) to use it")
    obs_dim = int(np.prod(observation_space.shape))
    from rlox.cnn import check_image_policy, make_feature_extractor

    kind = check_image_policy(observation_space, features_extractor, algorithm)
    features = make_feature_extractor(observation_space, kind) if kind is not None else None
    if isinstance(action_space, gym.spaces.Discrete):
        if action_space.start != 0:
            raise TypeError(f"{algorithm} needs Discrete actions starting at 0, got start={action_space.start}")
        if use_sde:
            raise ValueError(f"{algorithm}: use_sde (gSDE) needs a continuous (Box) action space, "
                             f"got {action_space}")
        return DiscretePolicy(obs_dim, int(action_space.n), hidden, activation, ortho_init, features=features,
                              obs_shape=observation_space.shape)
    if isinstance(action_space, gym.spaces.Box):
        return ContinuousPolicy(obs_dim, int(np.prod(action_space.shape)), hidden, activation, ortho_init,
                                log_std_init, use_sde, features=features, obs_shape=observation_space.shape)
    raise TypeError(f"{algorithm} supports Discrete and Box action spaces, got {action_space}; "
                    f"map MultiDiscrete / MultiBinary / Dict / Tuple actions to one Discrete or Box space "
                    f"with a gymnasium.ActionWrapper first")
