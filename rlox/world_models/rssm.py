"""DreamerV3's networks (Hafner et al., 2023): the RSSM with discrete latents, the encoders and
decoders for vectors and images, and the MLP heads.

State ``(h, z)``: ``h [B, deter]`` is the GRU's deterministic state, ``z [B, groups, classes]``
the one-hot stochastic latent (straight-through gradients). ``feat = cat(h, flat(z))`` is what
every head reads.

    rssm = RSSM(embed_dim=256, act_dim=1, deter=256, hidden=256, groups=16, classes=16)
    state = rssm.initial(B)
    state, post_logits, prior_logits = rssm.observe_step(state, prev_action, embed, is_first)
    state = rssm.imagine_step(state, action)          # prior only (no observation)
    h, z, post, prior = rssm.observe(embed, prev_action, is_first)   # [B, T, ...]: the training rollout

All MLPs are Linear -> LayerNorm -> SiLU (the paper's choice); output layers of the two-hot
heads start at zero, so the first predictions are 0 (the paper's zero-init of reward and critic).
The convolutions are Conv -> channel LayerNorm -> SiLU, on activations laid out channels-last
(NHWC in memory; values and shapes stay NCHW), the layout in which a CPU's convolutions run
fastest here and the channel LayerNorm needs no copy.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from rlox.inference import ChannelLayerNorm
from rlox.networks import draw_uniform
from rlox.world_models.functions import symlog, unimix_probs

__all__ = ["RSSMState", "RSSM", "NormGRUCell", "mlp_ln", "VectorEncoder", "VectorDecoder", "ConvEncoder",
           "ConvDecoder", "Head"]


def mlp_ln(in_dim: int, hidden: int, layers: int) -> nn.Sequential:
    """``layers`` x (Linear (no bias) -> LayerNorm -> SiLU): the trunk of every DreamerV3 MLP."""
    mods: list[nn.Module] = []
    last = in_dim
    for _ in range(layers):
        mods += [nn.Linear(last, hidden, bias=False), nn.LayerNorm(hidden, eps=1e-3), nn.SiLU()]
        last = hidden
    return nn.Sequential(*mods)


class Head(nn.Module):
    """MLP trunk + linear output (``zero_init``: output weights start at 0)."""

    def __init__(self, in_dim: int, out_dim: int, hidden: int, layers: int, zero_init: bool = False) -> None:
        super().__init__()
        self.trunk = mlp_ln(in_dim, hidden, layers)
        self.out = nn.Linear(hidden if layers > 0 else in_dim, out_dim)
        if zero_init:
            nn.init.zeros_(self.out.weight)
            nn.init.zeros_(self.out.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.trunk(x))

    def inference_layers(self) -> list[nn.Module]:
        """The layers in order (``rlox.artifacts.describe_network`` unrolls them)."""
        return [*self.trunk, self.out]


class NormGRUCell(nn.Module):
    """GRU cell with LayerNorm on its gates and the update gate biased towards keeping the
    state (``- 1``), as in DreamerV2/V3's RSSM."""

    def __init__(self, in_dim: int, size: int) -> None:
        super().__init__()
        self.size = size
        self.linear = nn.Linear(in_dim + size, 3 * size, bias=False)
        self.norm = nn.LayerNorm(3 * size, eps=1e-3)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        parts = self.norm(self.linear(torch.cat([x, h], -1)))
        reset, cand, update = parts.split(self.size, -1)
        reset = torch.sigmoid(reset)
        cand = torch.tanh(reset * cand)
        update = torch.sigmoid(update - 1.0)
        return update * cand + (1.0 - update) * h

    def inference_layers(self) -> list[nn.Module]:
        """The gates' layers ``[x, h] -> 3 * size`` (the gating is ``rlox.inference.RSSMCore``'s)."""
        return [self.linear, self.norm]


class RSSMState(NamedTuple):
    h: torch.Tensor     # [B, deter]
    z: torch.Tensor     # [B, groups, classes] one-hot (straight-through)


class RSSM(nn.Module):
    """Recurrent state-space model with ``groups`` categorical latents of ``classes`` classes.

    Prior ``p(z_t | h_t)``, posterior ``q(z_t | h_t, e_t)``, recurrence
    ``h_t = GRU(h_{t-1}, [z_{t-1}, a_{t-1}])``. Latents are sampled one-hot with the
    straight-through estimator (DreamerV2) from logits mixed with 1% uniform (``unimix``).
    """

    def __init__(self, embed_dim: int, act_dim: int, deter: int = 256, hidden: int = 256,
                 groups: int = 16, classes: int = 16, unimix: float = 0.01) -> None:
        super().__init__()
        self.deter, self.groups, self.classes, self.unimix = deter, groups, classes, unimix
        self.stoch = groups * classes
        self.img_in = mlp_ln(self.stoch + act_dim, hidden, 1)
        self.gru = NormGRUCell(hidden, deter)
        self.prior_net = Head(deter, self.stoch, hidden, 1)
        self.post_net = Head(deter + embed_dim, self.stoch, hidden, 1)

    @property
    def feat_dim(self) -> int:
        return self.deter + self.stoch

    def initial(self, batch: int, device: torch.device | str = "cpu") -> RSSMState:
        return RSSMState(torch.zeros(batch, self.deter, device=device),
                         torch.zeros(batch, self.groups, self.classes, device=device))

    @staticmethod
    def feat(state: RSSMState) -> torch.Tensor:
        return torch.cat([state.h, state.z.flatten(1)], -1)

    def _dist(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Head output ``[..., stoch]`` -> (logits, probabilities) ``[..., groups, classes]`` of the
        unimix categoricals; the probabilities are kept so sampling needs no second softmax."""
        return unimix_probs(raw.float().view(*raw.shape[:-1], self.groups, self.classes), self.unimix)

    @staticmethod
    def sample(logits: torch.Tensor, generator: torch.Generator | None = None, mode: bool = False) -> torch.Tensor:
        """One-hot samples of ``[..., K]`` logits with straight-through gradients."""
        return RSSM.sample_probs(F.softmax(logits, -1), generator, mode)

    @staticmethod
    def sample_probs(probs: torch.Tensor, generator: torch.Generator | None = None, mode: bool = False
                     ) -> torch.Tensor:
        """One-hot samples of ``[..., K]`` probabilities with straight-through gradients."""
        if mode:
            idx = probs.argmax(-1)
        else:
            # Inverse-CDF draw: one uniform per categorical (torch.multinomial draws one
            # exponential per class); the same distribution, K times fewer random numbers.
            u = draw_uniform((*probs.shape[:-1], 1), generator, probs)
            cdf = probs.detach().cumsum(-1)
            idx = (cdf <= u * cdf[..., -1:]).sum(-1).clamp(max=probs.shape[-1] - 1)   # first k with cdf_k > u
        one_hot = F.one_hot(idx, probs.shape[-1]).to(probs.dtype)
        return one_hot + probs - probs.detach()

    def _recur(self, state: RSSMState, action: torch.Tensor) -> torch.Tensor:
        x = self.img_in(torch.cat([state.z.flatten(1), action], -1))
        return self.gru(x, state.h)

    def observe_step(self, state: RSSMState, prev_action: torch.Tensor, embed: torch.Tensor,
                     is_first: torch.Tensor, generator: torch.Generator | None = None, mode: bool = False
                     ) -> tuple[RSSMState, torch.Tensor, torch.Tensor]:
        """One posterior step. ``is_first [B]`` resets the state and the previous action first.
        Returns (new state, posterior logits, prior logits) with logits ``[B, groups, classes]``."""
        keep = (1.0 - is_first.float()).unsqueeze(-1)
        state = RSSMState(state.h * keep, state.z * keep.unsqueeze(-1))
        h = self._recur(state, prev_action * keep)
        prior_logits, _ = self._dist(self.prior_net(h))
        post_logits, post_probs = self._dist(self.post_net(torch.cat([h, embed], -1)))
        z = self.sample_probs(post_probs, generator, mode)
        return RSSMState(h, z), post_logits, prior_logits

    def observe(self, embed: torch.Tensor, prev_action: torch.Tensor, is_first: torch.Tensor,
                generator: torch.Generator | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The posterior rollout over whole sequences from a fresh state: ``T`` calls of
        ``observe_step`` (same values, same random draws), with everything that does not depend
        on the recurrent state taken out of the time loop.

        Args: ``embed [B, T, E]``, ``prev_action [B, T, A]``, ``is_first [B, T]``.
        Returns ``h [B, T, deter]``, ``z [B, T, G, K]``, posterior and prior logits ``[B, T, G, K]``.

        Out of the loop: the reset masks and masked actions; the embedding's share of the
        posterior's first layer (``W [h; e] = W_h h + W_e e``, one matrix product over all steps);
        and the prior head, which reads only ``h`` and draws nothing, run once on all ``h``.
        """
        B, T = is_first.shape
        keep = (1.0 - is_first.float()).unsqueeze(-1)                    # [B, T, 1]
        actions = prev_action * keep
        post_in = self.post_net.trunk[0]                                 # Linear(deter + E -> hidden), no bias
        w_h, w_e = post_in.weight.split([self.deter, embed.shape[-1]], 1)
        embed_in = F.linear(embed, w_e)                                  # [B, T, hidden]
        post_rest = self.post_net.trunk[1:]                              # LayerNorm, SiLU
        h, z = self.initial(B, embed.device)
        hs, zs, posts = [], [], []
        for t in range(T):
            k = keep[:, t]
            h = self._recur(RSSMState(h * k, z * k.unsqueeze(-1)), actions[:, t])
            post_logits, post_probs = self._dist(self.post_net.out(post_rest(F.linear(h, w_h) + embed_in[:, t])))
            z = self.sample_probs(post_probs, generator)
            hs.append(h)
            zs.append(z)
            posts.append(post_logits)
        h_all = torch.stack(hs, 1)
        prior_logits, _ = self._dist(self.prior_net(h_all))
        return h_all, torch.stack(zs, 1), torch.stack(posts, 1), prior_logits

    def imagine_step(self, state: RSSMState, action: torch.Tensor,
                     generator: torch.Generator | None = None) -> RSSMState:
        """One prior step (dreaming): ``z ~ p(z | h)``."""
        h = self._recur(state, action)
        return RSSMState(h, self.sample_probs(self._dist(self.prior_net(h))[1], generator))


class VectorEncoder(nn.Module):
    """Vector observations -> embedding: ``symlog`` then an MLP (DreamerV3 sec. 3)."""

    def __init__(self, obs_dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.net = mlp_ln(obs_dim, hidden, layers)
        self.out_dim = hidden

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(symlog(obs))

    def inference_layers(self) -> list[nn.Module]:
        """``symlog`` then the MLP, as layers (``rlox.artifacts.describe_network`` unrolls them)."""
        from rlox.inference import Symlog

        return [Symlog(), *self.net]


class VectorDecoder(nn.Module):
    """``feat`` -> the observation in symlog space; the loss is the squared error to ``symlog(obs)``."""

    def __init__(self, feat_dim: int, obs_dim: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.head = Head(feat_dim, obs_dim, hidden, layers)

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        return self.head(feat)

    def loss(self, feat: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        """Per-step ``sum((pred - symlog(obs))^2)`` ``[...]``."""
        return ((self(feat) - symlog(obs)) ** 2).sum(-1)


def _conv_sizes(size: int, stages: int) -> int:
    for _ in range(stages):
        size = (size + 1) // 2
    return size


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x [N, C, H, W]`` laid out NHWC in memory (a copy unless it already is)."""
    return x.contiguous(memory_format=torch.channels_last)


class ConvEncoder(nn.Module):
    """Images ``[B, C, H, W]`` (uint8 0..255 or floats in the same range) -> embedding.

    Stride-2 4x4 convolutions doubling the channels from ``depth`` (DreamerV3's encoder), each
    followed by a LayerNorm over the channels of every pixel (``ChannelLayerNorm``, as the paper's
    code normalises NHWC activations) and SiLU, down to at most 6x6; pixels are scaled to
    [-0.5, 0.5]. The frames are laid out channels-last before the first convolution.
    """

    def __init__(self, obs_shape: tuple[int, int, int], depth: int = 16) -> None:
        super().__init__()
        c, h, w = obs_shape
        layers: list[nn.Module] = []
        ch, size, stages = c, min(h, w), 0
        while size > 6:
            out = depth * 2 ** stages
            layers += [nn.Conv2d(ch, out, 4, 2, 1), ChannelLayerNorm(out, eps=1e-3), nn.SiLU()]
            ch, size, stages = out, (size + 1) // 2, stages + 1
        self.net = nn.Sequential(*layers)
        self.stages, self.channels = stages, ch
        self.grid = (_conv_sizes(h, stages), _conv_sizes(w, stages))
        self.out_dim = ch * self.grid[0] * self.grid[1]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        lead = obs.shape[:-3]
        x = _channels_last(obs.reshape(-1, *obs.shape[-3:])).float() / 255.0 - 0.5
        return self.net(x).reshape(*lead, -1)          # (flattened in C, H, W order)

    def inference_layers(self) -> list[nn.Module]:
        """The pixel scaling, the conv stages and the flattening, as layers on ``[B, C, H, W]``
        (``rlox.artifacts.describe_network`` unrolls them; DreamerV3's export puts an
        ``ImageInput`` for the env's layout in front)."""
        from rlox.inference import Rescale

        return [Rescale(255.0, -0.5), *self.net, nn.Flatten()]


class ConvDecoder(nn.Module):
    """``feat`` -> image ``[B, C, H, W]`` in [-0.5, 0.5] (transposed convolutions mirroring
    ``ConvEncoder``); the loss is the squared error summed over pixels."""

    def __init__(self, feat_dim: int, encoder: ConvEncoder, obs_shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.obs_shape = obs_shape
        self.grid, self.channels = encoder.grid, encoder.channels
        self.fc = nn.Linear(feat_dim, encoder.out_dim)
        layers: list[nn.Module] = []
        ch = encoder.channels
        for i in reversed(range(encoder.stages)):
            last = i == 0
            out = obs_shape[0] if last else ch // 2
            layers.append(nn.ConvTranspose2d(ch, out, 4, 2, 1))
            if not last:
                layers += [ChannelLayerNorm(out, eps=1e-3), nn.SiLU()]
            ch = out
        self.net = nn.Sequential(*layers)

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        lead = feat.shape[:-1]
        x = self.fc(feat.reshape(-1, feat.shape[-1])).view(-1, self.channels, *self.grid)
        x = self.net(_channels_last(x))
        c, h, w = self.obs_shape
        return x[..., :h, :w].reshape(*lead, c, h, w)

    def loss(self, feat: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        pred = self(feat)
        target = _channels_last(obs.reshape(-1, *obs.shape[-3:])).float() / 255.0 - 0.5   # the same layout
        return ((pred - target.view(pred.shape)) ** 2).sum((-3, -2, -1))
