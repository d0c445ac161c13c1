"""The small pieces of DreamerV3 (Hafner et al., 2023, arXiv:2301.04104), as pure functions.

    symlog(x), symexp(x)                       # sign(x) ln(|x| + 1) and its inverse (eq. 1)
    twohot = TwoHot(); twohot.encode(y)        # [..., 255] weights on symlog-spaced bins (eq. 9)
    twohot.decode(logits); twohot.loss(logits, y)
    kl_balance(post_logits, prior_logits)      # dynamics / representation losses with free bits (eq. 5)
    ReturnNormalizer()                         # EMA of the 5th-95th percentile range of returns (eq. 7)
    lambda_returns(rewards, values, continues, gamma, lam)   # TD(lambda) over an imagined rollout

Shapes are written ``[..., K]`` where the leading dims are free (batch, time).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch.nn import functional as F

__all__ = ["symlog", "symexp", "TwoHot", "categorical_kl", "kl_balance", "unimix_logits", "unimix_probs",
           "ReturnNormalizer", "lambda_returns"]


def symlog(x: torch.Tensor) -> torch.Tensor:
    """``sign(x) * ln(|x| + 1)``: compresses large magnitudes, identity-like near 0 (DreamerV3 eq. 1)."""
    return torch.sign(x) * torch.log1p(torch.abs(x))


def symexp(x: torch.Tensor) -> torch.Tensor:
    """The inverse of ``symlog``: ``sign(x) * (exp(|x|) - 1)``."""
    return torch.sign(x) * torch.expm1(torch.abs(x))


class TwoHot:
    """Two-hot encoding on ``n_bins`` bins equally spaced in symlog space over ``[low, high]``
    (DreamerV3: 255 bins on [-20, 20]). A scalar ``y`` puts weight on the two bins around
    ``symlog(y)``, in proportion to closeness, so ``sum(w * bins) == symlog(y)`` exactly
    (clipped at the ends). Networks predict logits over the bins; the prediction is
    ``symexp(sum(softmax(logits) * bins))`` and the loss the cross-entropy to the two-hot target.
    """

    def __init__(self, n_bins: int = 255, low: float = -20.0, high: float = 20.0,
                 device: torch.device | str = "cpu") -> None:
        if n_bins < 2 or not low < high:
            raise ValueError(f"TwoHot needs n_bins >= 2 and low < high, got n_bins={n_bins}, low={low}, high={high}")
        self.n_bins = int(n_bins)
        self.bins = torch.linspace(low, high, n_bins, device=device)

    def to(self, device: torch.device | str) -> "TwoHot":
        self.bins = self.bins.to(device)
        return self

    def _neighbours(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``[...]`` targets -> (index of the bin below ``symlog(y)``, of the bin above, weight of
        the bin above), each ``[...]``; the bin below gets ``1 - weight``."""
        x = symlog(y.float()).clamp(self.bins[0], self.bins[-1])
        above = torch.bucketize(x, self.bins, right=True).clamp(1, self.n_bins - 1)   # first bin > x
        below = above - 1
        lo, hi = self.bins[below], self.bins[above]
        return below, above, ((x - lo) / (hi - lo)).clamp(0.0, 1.0)

    def encode(self, y: torch.Tensor) -> torch.Tensor:
        """``[...]`` targets -> ``[..., n_bins]`` two-hot weights of ``symlog(y)``."""
        below, above, w_hi = self._neighbours(y)
        out = torch.zeros(*w_hi.shape, self.n_bins, device=w_hi.device, dtype=torch.float32)
        out.scatter_(-1, below.unsqueeze(-1), (1.0 - w_hi).unsqueeze(-1))
        out.scatter_add_(-1, above.unsqueeze(-1), w_hi.unsqueeze(-1))
        return out

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """``[..., n_bins]`` logits -> ``[...]`` predictions ``symexp(E[bins])``."""
        # E[bins] as a matrix-vector product: one pass over the bins instead of a product and a sum.
        return symexp(F.softmax(logits.float(), -1) @ self.bins)

    def nll(self, logp: torch.Tensor, y: torch.Tensor | Sequence[torch.Tensor],
            scales: Sequence[float] | None = None) -> torch.Tensor:
        """``[...]`` cross-entropy of ``encode(y)`` under log-probabilities ``logp [..., n_bins]``;
        with several targets ``y = [y_1, y_2, ...]``, ``sum_i scales_i * CE(encode(y_i))``.
        A two-hot target has two non-zero weights, so this gathers them from ``logp`` (one gather
        for all targets) instead of multiplying by dense ``encode(y)`` rows: the same value with a
        fraction of the memory traffic, which matters for 255 bins over ``[H, B*T]`` critic states."""
        ys = [y] if isinstance(y, torch.Tensor) else list(y)
        scales = [1.0] * len(ys) if scales is None else list(scales)
        if len(scales) != len(ys):
            raise ValueError(f"TwoHot.nll: {len(ys)} targets but {len(scales)} scales; give one scale per target")
        idx, wts = [], []
        for target, scale in zip(ys, scales):
            below, above, w_hi = self._neighbours(target.detach())
            idx += [below, above]
            wts += [scale * (1.0 - w_hi), scale * w_hi]
        return -(logp.gather(-1, torch.stack(idx, -1)) * torch.stack(wts, -1)).sum(-1)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``[...]`` cross-entropy between ``softmax(logits)`` and ``encode(y)`` (``y`` raw, not symlog)."""
        return self.nll(F.log_softmax(logits.float(), -1), y)


def unimix_probs(logits: torch.Tensor, unimix: float = 0.01) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, probabilities) of ``(1 - unimix) * softmax(logits) + unimix / K`` (DreamerV3: 1%
    uniform mix keeps every class probable, so KL terms stay finite and the latents never
    collapse); the probabilities are returned so a sampler needs no second softmax."""
    probs = F.softmax(logits.float(), -1)
    if unimix <= 0:
        return logits, probs
    probs = (1.0 - unimix) * probs + unimix / probs.shape[-1]
    return torch.log(probs), probs


def unimix_logits(logits: torch.Tensor, unimix: float = 0.01) -> torch.Tensor:
    """Logits of ``(1 - unimix) * softmax(logits) + unimix / K`` (see ``unimix_probs``)."""
    if unimix <= 0:
        return logits
    return unimix_probs(logits, unimix)[0]


def categorical_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """``KL(p || q)`` of categoricals over the last axis, summed over the second-to-last
    (the latent groups): ``[..., G, K]`` -> ``[...]``."""
    p_logp = F.log_softmax(p_logits.float(), -1)
    q_logp = F.log_softmax(q_logits.float(), -1)
    return (p_logp.exp() * (p_logp - q_logp)).sum(-1).sum(-1)


def kl_balance(post_logits: torch.Tensor, prior_logits: torch.Tensor, free_bits: float = 1.0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DreamerV3's KL balancing with free bits (eq. 5), per step ``[...]``:

    * dynamics loss ``max(free_bits, KL(sg(post) || prior))`` trains the prior;
    * representation loss ``max(free_bits, KL(post || sg(prior)))`` trains the posterior;
    * the raw ``KL(post || prior)`` for logging.

    Below ``free_bits`` nats the losses are constant, so their gradients vanish there and the
    model spends its capacity on the prediction losses. The caller weights them (0.5 and 0.1).
    """
    dyn = categorical_kl(post_logits.detach(), prior_logits)
    rep = categorical_kl(post_logits, prior_logits.detach())
    return dyn.clamp(min=free_bits), rep.clamp(min=free_bits), dyn.detach()


class ReturnNormalizer:
    """Return scale ``S``: EMA (``decay``) of ``Per(R, 95) - Per(R, 5)`` over imagined returns
    (DreamerV3 eq. 7). Advantages are divided by ``max(1, S)``: large returns are scaled down,
    small ones are not scaled up (so sparse rewards are not amplified noise)."""

    def __init__(self, decay: float = 0.99, low: float = 0.05, high: float = 0.95, limit: float = 1.0) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"ReturnNormalizer: decay must be in [0, 1), got {decay}")
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(f"ReturnNormalizer: need 0 <= low < high <= 1, got low={low}, high={high}")
        self.decay, self.low, self.high, self.limit = float(decay), float(low), float(high), float(limit)
        self.scale: float | None = None     # the EMA of the percentile range (None before any update)

    def update(self, returns: torch.Tensor) -> float:
        """Fold a batch of returns in; returns the divisor ``max(limit, S)``."""
        flat = returns.detach().float().reshape(-1)
        q = torch.quantile(flat, torch.tensor([self.low, self.high], device=flat.device))
        rng = float(q[1] - q[0])
        self.scale = rng if self.scale is None else self.decay * self.scale + (1.0 - self.decay) * rng
        return self.divisor

    @property
    def divisor(self) -> float:
        return max(self.limit, self.scale if self.scale is not None else 0.0)

    def state_dict(self) -> dict:
        return {"scale": self.scale}

    def load_state_dict(self, state: dict) -> None:
        self.scale = None if state.get("scale") is None else float(state["scale"])


def lambda_returns(rewards: torch.Tensor, values: torch.Tensor, continues: torch.Tensor,
                   gamma: float, lam: float) -> torch.Tensor:
    """TD(lambda) returns of an imagined rollout, bootstrapped from the last value.

    Args: ``rewards [H, N]`` (reward on reaching state t+1), ``values [H+1, N]`` (of states
    0..H), ``continues [H, N]`` (probability that state t+1 is not terminal).
    Returns ``[H, N]``: ``R_t = r_t + gamma c_t ((1 - lam) v_{t+1} + lam R_{t+1})``, ``R_H = v_H``.
    """
    out = []
    last = values[-1]
    for t in reversed(range(rewards.shape[0])):
        last = rewards[t] + gamma * continues[t] * ((1.0 - lam) * values[t + 1] + lam * last)
        out.append(last)
    return torch.stack(out[::-1], 0)
