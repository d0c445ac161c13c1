"""Convolutional feature extractors for image observations, in plain torch (no torchvision).

    from rlox.cnn import make_feature_extractor
    features = make_feature_extractor(env.observation_space, "nature")   # [B, *obs] -> [B, 512]

Inputs are images of a ``uint8`` Box space, channel-first ``(C, H, W)`` or channel-last
``(H, W, C)`` (detected with ``rlox.wrappers.visual.image_layout``; channel-last inputs are
permuted inside the module), as uint8 or as floats holding the same 0..255 values; the module
scales them to [0, 1] itself, so rollouts and replay can keep uint8.

* ``NatureCNN`` (Mnih et al., 2015): 32x8x8/4, 64x4x4/2, 64x3x3/1 convolutions, ReLU, a
  512-unit linear layer (SB3's and CleanRL's Atari network).
* ``ImpalaCNN`` (Espeholt et al., 2018): three stages of conv + max-pool + two residual blocks
  (16, 32, 32 channels), ReLU, a 256-unit linear layer.
"""
from __future__ import annotations

import math
from typing import Literal, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlox.inference import ImageInput

__all__ = ["NatureCNN", "ImpalaCNN", "CnnQNetwork", "make_feature_extractor", "FEATURE_EXTRACTORS",
           "check_image_policy"]

FEATURE_EXTRACTORS = ("nature", "impala")


def _image_input(space: gym.Space) -> ImageInput:
    """The input layer (layout detection, uint8 scaling) for an image space; ValueError otherwise."""
    from rlox.wrappers.visual import image_layout

    layout = image_layout(space.shape) if isinstance(space, gym.spaces.Box) else None
    if layout is None:
        raise ValueError(f"a CNN feature extractor needs an image observation space ((C, H, W), (H, W, C) "
                         f"or (H, W)), got {space}")
    return ImageInput(space.shape, layout)


class _Unrolled(nn.Module):
    """An extractor that ``rlox.artifacts`` can write as a flat layer list (``inference_layers``)."""

    inp: ImageInput
    conv: nn.Sequential
    fc: nn.Sequential

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(self.inp(obs)))

    def inference_layers(self) -> list[nn.Module]:
        return [self.inp, self.conv, self.fc]


class NatureCNN(_Unrolled):
    """DQN's network body (Mnih et al., 2015): ``[B, *obs] -> [B, features_dim]``."""

    def __init__(self, observation_space: gym.Space, features_dim: int = 512) -> None:
        super().__init__()
        self.inp = _image_input(observation_space)
        c, h, w = self.inp.chw
        if min(h, w) < 36:
            raise ValueError(f"NatureCNN needs images of at least 36x36 pixels (its 8x8/4, 4x4/2, 3x3 "
                             f"convolutions), got {h}x{w}; use ImpalaCNN or resize with ImagePreprocess")
        self.conv = nn.Sequential(nn.Conv2d(c, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                                  nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n = self.conv(torch.zeros(1, c, h, w)).shape[1]
        self.fc = nn.Sequential(nn.Linear(n, features_dim), nn.ReLU())
        self.features_dim = int(features_dim)
        for m in self.modules():          # orthogonal, gain sqrt(2) (the PPO Atari details)
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.orthogonal_(m.weight, math.sqrt(2))
                nn.init.zeros_(m.bias)


class _Residual(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv0 = nn.Conv2d(c, c, 3, padding=1)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))

    def residual_body(self) -> list[nn.Module]:
        """The same block as layers, for ``rlox.artifacts`` (``x + body(x)``)."""
        return [nn.ReLU(), self.conv0, nn.ReLU(), self.conv1]


class ImpalaCNN(_Unrolled):
    """IMPALA's residual network (Espeholt et al., 2018): ``[B, *obs] -> [B, features_dim]``."""

    def __init__(self, observation_space: gym.Space, features_dim: int = 256,
                 channels: Sequence[int] = (16, 32, 32)) -> None:
        super().__init__()
        self.inp = _image_input(observation_space)
        chw = self.inp.chw
        c = chw[0]
        stages: list[nn.Module] = []
        for out in channels:
            stages += [nn.Conv2d(c, out, 3, padding=1), nn.MaxPool2d(3, 2, padding=1), _Residual(out), _Residual(out)]
            c = out
        self.conv = nn.Sequential(*stages, nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n = self.conv(torch.zeros(1, *chw)).shape[1]
        self.fc = nn.Sequential(nn.Linear(n, features_dim), nn.ReLU())
        self.features_dim = int(features_dim)


def make_feature_extractor(observation_space: gym.Space, kind: Literal["nature", "impala"] = "nature"
                           ) -> NatureCNN | ImpalaCNN:
    """The ``kind`` CNN for ``observation_space`` (``"nature"`` or ``"impala"``)."""
    if kind == "nature":
        return NatureCNN(observation_space)
    if kind == "impala":
        return ImpalaCNN(observation_space)
    raise ValueError(f"features_extractor must be one of {FEATURE_EXTRACTORS}, got {kind!r}")


class CnnQNetwork(nn.Module):
    """DQN's Q-network for images: a CNN and a linear layer to one value per action
    (``[B, *obs] -> [B, n_actions]``), as in Mnih et al. (2015) and SB3's CnnPolicy."""

    def __init__(self, observation_space: gym.Space, n_actions: int, kind: str = "nature") -> None:
        super().__init__()
        self.features = make_feature_extractor(observation_space, kind)   # type: ignore[arg-type]
        self.head = nn.Linear(self.features.features_dim, int(n_actions))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(obs))

    def inference_layers(self) -> list[nn.Module]:
        return [self.features, self.head]


def check_image_policy(observation_space: gym.Space, features_extractor: str, algorithm: str) -> str | None:
    """The CNN to use (None: an MLP) for this space and setting; a clear error for an image
    space given to ``"mlp"`` (it would flatten thousands of pixels into a dense layer)."""
    from rlox.wrappers.visual import is_image_space

    image = is_image_space(observation_space)
    if features_extractor == "auto":
        return "nature" if image else None
    if features_extractor == "mlp":
        if image:
            raise ValueError(f"{algorithm}: the observation space {observation_space} holds images, and "
                             f"features_extractor='mlp' would flatten {int(np.prod(observation_space.shape))} "
                             f"pixels into a dense layer; use features_extractor='nature' (NatureCNN) or "
                             f"'impala' (or 'auto', which picks the CNN for images)")
        return None
    if features_extractor in FEATURE_EXTRACTORS:
        if not image:
            raise ValueError(f"{algorithm}: features_extractor={features_extractor!r} needs uint8 image "
                             f"observations, got {observation_space}; use 'mlp' or 'auto'")
        return features_extractor
    raise ValueError(f"{algorithm}: features_extractor must be 'auto', 'mlp', 'nature' or 'impala', "
                     f"got {features_extractor!r}")
