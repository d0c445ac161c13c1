"""Run a trained policy from its artifacts folder, with torch and no rlox training code.

    from rlox.inference import InferencePolicy, InferenceRunner
    policy = InferencePolicy.load("runs/cartpole")
    action = policy.act(obs, deterministic=True)        # raw observation in, env action out

    runner = InferenceRunner.load("runs/cartpole", env="CartPole-v1")   # or a gymnasium env
    result = runner.run_episode()                       # {'return': 500.0, 'length': 500}

The folder holds ``inference.yaml`` (architecture, observation normalisation, action space),
``actor.safetensors`` and, when observations were normalised in training,
``normalizer.safetensors``; ``rlox.artifacts`` writes them. This module imports only NumPy,
PyTorch, PyYAML and safetensors (gymnasium when an env id is given), so it can be copied on
its own into a deployment. A missing, corrupt or inconsistent file raises ``ArtifactError``
(``FileNotFoundError`` for a missing one) naming the file.

Multi-agent policies (MAPPO/IPPO) are one ordinary artifact per agent, under
``agents/<agent>/`` (a shared actor gets the agent's one-hot id baked in as an
``append_constant`` layer), listed by the top ``inference.yaml``'s ``multi_agent`` section:

    from rlox.inference import MultiAgentInferencePolicy
    policy = MultiAgentInferencePolicy.load("runs/spread")
    actions = policy.act({"agent_0": obs0, "agent_1": obs1}, deterministic=True)   # {agent: action}
    one = InferencePolicy.load("runs/spread/agents/agent_0")    # or one agent's policy on its own

Recurrent policies (RecurrentPPO's LSTM, DreamerV3's RSSM) have a ``policy.recurrent`` section
(file version 2; feed-forward files stay version 1); ``InferencePolicy.load`` gives a
``RecurrentInferencePolicy``, which keeps the recurrent state of each env of the batch:

    policy = InferencePolicy.load("runs/cartpole-novel")
    action = policy.act(obs)                  # state carried from call to call, one row per env
    policy.reset_state()                      # all envs start an episode (or reset_state([i]) / a mask)
    action, state = policy.predict(obs, state=None, episode_start=starts)   # the explicit form

The LSTM is rebuilt here with torch alone, and so is DreamerV3's acting path (encoder, the
RSSM's posterior step, the actor): a few dozen lines of torch that mirror
``rlox.world_models.rssm.RSSM.observe_step`` (tests check that the two agree), so Dreamer
artifacts deploy without rlox too, on vector or image observations (file version 3 for images:
the convolutional encoder's ``channel_layer_norm`` and ``rescale`` layers).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import nn

__all__ = ["InferencePolicy", "RecurrentInferencePolicy", "MultiAgentInferencePolicy", "InferenceRunner",
           "ArtifactError", "AppendConstant", "ImageInput", "Rescale", "ChannelLayerNorm", "Residual", "Symlog",
           "LSTMCore", "RSSMCore", "RawObservationEncoder",
           "INFERENCE_FILE", "ACTOR_FILE", "NORMALIZER_FILE", "DISTRIBUTIONS", "RECURRENT_TYPES"]

INFERENCE_FORMAT = "rlox-inference"
#: The newest file version this module reads. Version 2 added recurrent policies (the
#: ``policy.recurrent`` section) and DreamerV3's distributions; version 3 the layers of DreamerV3's
#: image encoder (``channel_layer_norm``, ``group_norm``, ``rescale``, ``image_input`` with
#: ``scale: false``). The writer marks a file with the lowest version that reads it, so
#: feed-forward artifacts stay version 1 and vector DreamerV3 ones version 2 (older readers load them).
INFERENCE_VERSION = 3
INFERENCE_FILE = "inference.yaml"
ACTOR_FILE = "actor.safetensors"
NORMALIZER_FILE = "normalizer.safetensors"
#: distribution -> the outputs (or tensors) it needs.
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "categorical": ("logits",),
    "gaussian": ("mean", "log_std"),
    "squashed_gaussian": ("mean", "log_std"),
    "deterministic": ("action",),
    "squashed_deterministic": ("action",),
    "greedy": ("q_values",),
    # DreamerV3's actor (Hafner et al., 2023, sec. 3): a categorical mixed with ``unimix`` uniform
    # (``policy.distribution_args.unimix``), and the bounded normal (mean tanh, std in [0.1, 1],
    # samples clipped to [-1, 1], then scaled to the action bounds) of the raw [mean, std] output.
    "unimix_categorical": ("logits",),
    "bounded_normal": ("mean_std",),
}
#: Distributions new in version 2 (a file using one is written as version 2).
VERSION_2_DISTRIBUTIONS = ("unimix_categorical", "bounded_normal")
#: ``policy.recurrent`` types: torch's LSTM (RecurrentPPO), DreamerV3's RSSM posterior step.
RECURRENT_TYPES = ("lstm", "rssm")


#: gSDE's variance floor, as rlox.policies.ActorCritic uses it.
_SDE_EPS = 1e-6


class ArtifactError(ValueError):
    """An artifacts file is corrupt, inconsistent, or describes something unsupported."""


class AppendConstant(nn.Module):
    """``x [..., d]`` -> ``[..., d + k]``: appends fixed values (e.g. a one-hot agent id) to
    every input row. Layer type ``append_constant`` in ``inference.yaml``, with its ``values``."""

    def __init__(self, values: Any) -> None:
        super().__init__()
        self.register_buffer("values", torch.as_tensor(np.asarray(values, dtype=np.float32).reshape(-1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.values.to(x.dtype).expand(*x.shape[:-1], self.values.shape[0])], dim=-1)


#: image layouts ``ImageInput`` accepts: channel-first, channel-last, one grey channel.
IMAGE_LAYOUTS = ("chw", "hwc", "hw")


class ImageInput(nn.Module):
    """``[B, *obs]`` images (uint8, or floats holding the same 0..255 values; flat ``[B, C*H*W]``
    rows too) -> ``[B, C, H, W]`` floats in [0, 1], the input of a CNN. ``layout`` is ``"chw"``,
    ``"hwc"`` (permuted to channel-first) or ``"hw"`` (one channel). Layer type ``image_input``
    in ``inference.yaml``, with ``obs_shape`` and ``layout``; ``rlox.cnn``'s extractors start with it.

    ``scale=False`` (``scale: false`` in the file, version 3) only lays the pixels out: the raw
    0..255 values come out as floats ``[B, C, H, W]``, channels-last in memory as DreamerV3's
    training encoder lays them (so the two compute the same bits), for networks that scale them
    their own way (DreamerV3's encoder: a ``rescale`` layer next).
    """

    def __init__(self, obs_shape: Any, layout: str, scale: bool = True) -> None:
        super().__init__()
        shape = tuple(int(d) for d in obs_shape)
        if layout not in IMAGE_LAYOUTS or len(shape) != len(layout) or min(shape, default=0) < 1:
            raise ValueError(f"ImageInput needs a layout in {IMAGE_LAYOUTS} and an obs_shape of as many positive "
                             f"sizes, got layout {layout!r} and obs_shape {obs_shape!r}")
        self.obs_shape, self.layout, self.scale = shape, layout, bool(scale)
        if layout == "hw":
            self.chw = (1, shape[0], shape[1])
        elif layout == "hwc":
            self.chw = (shape[2], shape[0], shape[1])
        else:
            self.chw = shape

    @property
    def channels_last(self) -> bool:
        return self.layout == "hwc"

    def extra_repr(self) -> str:
        return f"obs_shape={self.obs_shape}, layout={self.layout!r}" + ("" if self.scale else ", scale=False")

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(-1, *self.obs_shape)     # (flat [B, C*H*W] rows from a replay buffer too)
        if self.layout == "hw":
            x = x.unsqueeze(-3)
        elif self.layout == "hwc":
            x = x.movedim(-1, -3)
        x = x.reshape(-1, *self.chw)
        if not self.scale:
            return x.contiguous(memory_format=torch.channels_last).float()   # (hwc frames: already, no copy)
        # Channels-last activations: oneDNN's convolutions run ~1.3x faster on them on CPU
        # (NatureCNN forward+backward, batch 256, one thread: 390 -> 303 ms); same values.
        # The layout change is made on the input's own dtype (uint8 frames: a quarter of the
        # bytes of floats), then one multiply by a float32 0-dim scale gives float32 (whatever
        # torch's default dtype), keeping the layout: batch 256 of (4, 84, 84), 29 -> 22 ms;
        # equal values.
        x = x.contiguous(memory_format=torch.channels_last)
        if x.dtype != torch.float32:
            x = x if x.dtype == torch.uint8 else x.float()
        return x * torch.tensor(1.0 / 255.0, dtype=torch.float32)


class Rescale(nn.Module):
    """``x / divisor + offset`` in float32; DreamerV3's pixels ``x / 255 - 0.5``
    (``rlox.world_models.rssm.ConvEncoder``) are ``divisor=255, offset=-0.5``. Layer type
    ``rescale`` in ``inference.yaml`` (version 3), with ``divisor`` and ``offset``."""

    def __init__(self, divisor: float, offset: float = 0.0) -> None:
        super().__init__()
        divisor, offset = float(divisor), float(offset)
        if not (math.isfinite(divisor) and divisor != 0.0 and math.isfinite(offset)):
            raise ValueError(f"Rescale needs a finite, non-zero divisor and a finite offset, got divisor "
                             f"{divisor!r} and offset {offset!r}")
        self.divisor, self.offset = divisor, offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() / self.divisor + self.offset

    def extra_repr(self) -> str:
        return f"divisor={self.divisor}, offset={self.offset}"


class ChannelLayerNorm(nn.Module):
    """LayerNorm over the channel axis of images ``[..., C, H, W]``, at every pixel on its own
    (DreamerV3's convolutional encoder and decoder normalise their channels, as LayerNorm on
    NHWC does in Hafner et al.'s code; ``nn.GroupNorm(1, C)`` would instead normalise each image
    over channels and pixels together). ``weight`` and ``bias`` are ``[C]``. On a channels-last
    tensor the NHWC view is contiguous, so no copy is made. Layer type ``channel_layer_norm`` in
    ``inference.yaml`` (version 3), with ``num_channels``, ``eps`` and ``affine``."""

    def __init__(self, num_channels: int, eps: float = 1e-5, affine: bool = True) -> None:
        super().__init__()
        if isinstance(num_channels, bool) or not isinstance(num_channels, int) or num_channels < 1:
            raise ValueError(f"ChannelLayerNorm needs num_channels as a positive int, got {num_channels!r}")
        eps = float(eps)
        if not (math.isfinite(eps) and eps > 0):
            raise ValueError(f"ChannelLayerNorm needs a positive, finite eps, got {eps!r}")
        self.num_channels, self.eps, self.affine = num_channels, eps, bool(affine)
        self.weight = nn.Parameter(torch.ones(num_channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_channels)) if affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 3 or x.shape[-3] != self.num_channels:
            raise ValueError(f"ChannelLayerNorm({self.num_channels}) expects images [..., {self.num_channels}, H, W], "
                             f"got shape {tuple(x.shape)}")
        y = nn.functional.layer_norm(x.movedim(-3, -1), (self.num_channels,), self.weight, self.bias, self.eps)
        return y.movedim(-1, -3)

    def extra_repr(self) -> str:
        return f"{self.num_channels}, eps={self.eps}, affine={self.affine}"


class Residual(nn.Module):
    """``x + body(x)`` (a residual block, e.g. IMPALA's). Layer type ``residual`` in
    ``inference.yaml``, whose ``layers`` list describes ``body``."""

    def __init__(self, layers: Any) -> None:
        super().__init__()
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)

    def residual_body(self) -> list[nn.Module]:
        return list(self.body)


class Symlog(nn.Module):
    """``sign(x) * ln(|x| + 1)`` (DreamerV3 eq. 1; the same as ``rlox.world_models.functions.symlog``,
    restated here so this module needs no rlox code). Layer type ``symlog`` in ``inference.yaml``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sign(x) * torch.log1p(torch.abs(x))


# ---------------------------------------------------------------------- recurrent cores
# A core maps (normalised observations [B, *obs], state, episode starts [B]) to the features the
# policy's output networks read, and the new state. Its state is a tuple of tensors of
# ``state_shapes(B)``; zeros (or any state with the start flags set) is a fresh episode. ``commit(pending, policy_action)`` completes the new state once the action is chosen
# (DreamerV3's RSSM feeds its previous action back; the LSTM does not).
class LSTMCore(nn.Module):
    """``policy.recurrent`` type ``lstm``: flattened observation -> torch ``nn.LSTM`` (one step)
    -> features ``[B, hidden_size]``. State ``(h, c)``, each ``[num_layers, B, hidden_size]``
    (RecurrentPPO's actor LSTM and ``RecurrentPPO.predict``'s state); tensors
    ``recurrent.<nn.LSTM parameter name>``."""

    state_names = ("h", "c")

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True) -> None:
        super().__init__()
        self.lstm = nn.LSTM(int(input_size), int(hidden_size), int(num_layers), bias=bool(bias))

    def state_shapes(self, n: int) -> list[tuple[int, ...]]:
        shape = (self.lstm.num_layers, int(n), self.lstm.hidden_size)
        return [shape, shape]

    def features(self, x: torch.Tensor, state: tuple[torch.Tensor, ...], starts: torch.Tensor,
                 deterministic: bool, generator: torch.Generator) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        B = x.shape[0]
        keep = (1.0 - starts.to(x.dtype)).view(1, B, 1)     # an episode start forgets the last episode
        out, (h, c) = self.lstm(x.reshape(1, B, -1), (state[0] * keep, state[1] * keep))
        return out[0], (h, c)

    def commit(self, pending: tuple[torch.Tensor, ...], policy_action: torch.Tensor | None
               ) -> tuple[torch.Tensor, ...]:
        return pending


class RSSMCore(nn.Module):
    """``policy.recurrent`` type ``rssm``: DreamerV3's acting path (Hafner et al., 2023) up to the
    actor's input. It mirrors ``rlox.world_models.rssm.RSSM.observe_step`` (the posterior step;
    the prior is not needed to act) and ``NormGRUCell``; ``tests/test_recurrent_artifacts.py``
    checks that the two agree, random draws included.

    State ``(h [B, deter], z [B, groups, classes] one-hot, previous action [B, action_dim])``
    (the action in the actor's space: one-hot, or in [-1, 1]). Features ``cat(h, flat(z))``.
    The networks (named in the section) are ordinary layer lists: ``encoder`` (observation ->
    embedding: ``symlog`` and an MLP for vectors; for images ``image_input`` (``scale: false``),
    ``rescale`` to [-0.5, 0.5], conv2d / group_norm / silu stages and ``flatten``), ``img_in``
    (``[z, a]`` -> GRU input), ``gru`` (``[x, h]`` -> the 3 x deter gates: Linear and LayerNorm)
    and ``posterior`` (``[h, embedding]`` -> latent logits).
    """

    state_names = ("h", "z", "prev_action")

    def __init__(self, encoder: nn.Module, img_in: nn.Module, gru: nn.Module, posterior: nn.Module, *,
                 deter: int, groups: int, classes: int, unimix: float, action_dim: int) -> None:
        super().__init__()
        self.encoder, self.img_in, self.gru, self.posterior = encoder, img_in, gru, posterior
        self.deter, self.groups, self.classes = int(deter), int(groups), int(classes)
        self.unimix, self.action_dim = float(unimix), int(action_dim)

    def state_shapes(self, n: int) -> list[tuple[int, ...]]:
        return [(int(n), self.deter), (int(n), self.groups, self.classes), (int(n), self.action_dim)]

    def features(self, x: torch.Tensor, state: tuple[torch.Tensor, ...], starts: torch.Tensor,
                 deterministic: bool, generator: torch.Generator) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        h, z, prev_action = state
        keep = (1.0 - starts.float()).unsqueeze(-1)          # is_first: reset h, z and the action
        h, z, prev_action = h * keep, z * keep.unsqueeze(-1), prev_action * keep
        embed = self.encoder(x)
        # h_t = GRU(h_{t-1}, [z_{t-1}, a_{t-1}]): LayerNorm on the gates, update gate biased -1.
        gru_in = self.img_in(torch.cat([z.flatten(1), prev_action], -1))
        reset, cand, update = self.gru(torch.cat([gru_in, h], -1)).split(self.deter, -1)
        reset = torch.sigmoid(reset)
        cand = torch.tanh(reset * cand)
        update = torch.sigmoid(update - 1.0)
        h = update * cand + (1.0 - update) * h
        # Posterior q(z | h, e): groups x classes categoricals with `unimix` uniform mixed in.
        raw = self.posterior(torch.cat([h, embed], -1)).float()
        probs = torch.softmax(raw.view(-1, self.groups, self.classes), -1)
        if self.unimix > 0:
            probs = (1.0 - self.unimix) * probs + self.unimix / self.classes
        if deterministic:
            idx = probs.argmax(-1)
        else:   # inverse-CDF draw, one uniform per categorical (as RSSM.sample_probs)
            u = torch.rand(*probs.shape[:-1], 1, generator=generator, dtype=probs.dtype)
            cdf = probs.cumsum(-1)
            idx = (cdf <= u * cdf[..., -1:]).sum(-1).clamp(max=self.classes - 1)
        # The straight-through form of training (one_hot + p - sg(p)) is kept: it differs from
        # the plain one-hot in the last bit, and the trained agent feeds that value back.
        z = torch.nn.functional.one_hot(idx, self.classes).to(probs.dtype) + probs - probs
        return torch.cat([h, z.flatten(1)], -1), (h, z)

    def commit(self, pending: tuple[torch.Tensor, ...], policy_action: torch.Tensor | None
               ) -> tuple[torch.Tensor, ...]:
        return (*pending, policy_action.float())


def _ints(layer: Mapping[str, Any], key: str, where: str, default: Any = None, n: int = 2) -> tuple[int, ...]:
    value = layer.get(key, default)
    values = [value] * n if isinstance(value, int) and not isinstance(value, bool) else value
    if (not isinstance(values, (list, tuple)) or len(values) != n
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)):
        raise ArtifactError(f"{where}: {layer.get('type')} needs {key!r} as {n} non-negative ints, got {value!r}")
    return tuple(values)


def _build_layer(layer: Mapping[str, Any], where: str) -> nn.Module:
    kind = layer.get("type")
    if kind == "conv2d":
        for key in ("in_channels", "out_channels"):
            if not isinstance(layer.get(key), int) or layer[key] < 1:
                raise ArtifactError(f"{where}: conv2d needs {key!r} as a positive int, got {layer.get(key)!r}")
        return nn.Conv2d(int(layer["in_channels"]), int(layer["out_channels"]), _ints(layer, "kernel_size", where),
                         stride=_ints(layer, "stride", where, 1), padding=_ints(layer, "padding", where, 0),
                         dilation=_ints(layer, "dilation", where, 1), groups=int(layer.get("groups", 1)),
                         bias=bool(layer.get("bias", True)))
    if kind == "max_pool2d":
        return nn.MaxPool2d(_ints(layer, "kernel_size", where), stride=_ints(layer, "stride", where),
                            padding=_ints(layer, "padding", where, 0), dilation=_ints(layer, "dilation", where, 1),
                            ceil_mode=bool(layer.get("ceil_mode", False)))
    if kind == "image_input":
        scale = layer.get("scale", True)
        if not isinstance(scale, bool):
            raise ArtifactError(f"{where}: image_input 'scale' must be true or false, got {scale!r}")
        try:
            return ImageInput(layer.get("obs_shape") or (), str(layer.get("layout")), scale=scale)
        except (TypeError, ValueError) as exc:
            raise ArtifactError(f"{where}: {exc}") from None
    if kind == "rescale":
        values = [layer.get("divisor"), layer.get("offset", 0.0)]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            raise ArtifactError(f"{where}: rescale needs 'divisor' and 'offset' as numbers, got {values}")
        try:
            return Rescale(*values)
        except ValueError as exc:
            raise ArtifactError(f"{where}: {exc}") from None
    if kind == "group_norm":
        groups, channels = layer.get("num_groups"), layer.get("num_channels")
        eps, affine = layer.get("eps", 1e-5), layer.get("affine", True)
        if (not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (groups, channels))
                or channels % groups):
            raise ArtifactError(f"{where}: group_norm needs 'num_groups' and 'num_channels' as positive ints, "
                                f"num_channels a multiple of num_groups; got {groups!r} and {channels!r}")
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0 or not isinstance(affine, bool):
            raise ArtifactError(f"{where}: group_norm needs 'eps' as a positive number and 'affine' as true or "
                                f"false, got {eps!r} and {affine!r}")
        return nn.GroupNorm(groups, channels, eps=float(eps), affine=affine)
    if kind == "channel_layer_norm":
        channels, eps, affine = layer.get("num_channels"), layer.get("eps", 1e-5), layer.get("affine", True)
        if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
            raise ArtifactError(f"{where}: channel_layer_norm needs 'num_channels' as a positive int, got {channels!r}")
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps > 0 or not isinstance(affine, bool):
            raise ArtifactError(f"{where}: channel_layer_norm needs 'eps' as a positive number and 'affine' as true "
                                f"or false, got {eps!r} and {affine!r}")
        return ChannelLayerNorm(channels, eps=float(eps), affine=affine)
    if kind == "residual":
        body = layer.get("layers")
        if not isinstance(body, list) or not body:
            raise ArtifactError(f"{where}: residual needs 'layers', a non-empty list of layers, got {body!r}")
        return Residual([_build_layer(sub if isinstance(sub, dict) else {}, f"{where} residual layer {j}")
                         for j, sub in enumerate(body)])
    if kind == "linear":
        return nn.Linear(int(layer["in_features"]), int(layer["out_features"]), bias=bool(layer.get("bias", True)))
    if kind == "layer_norm":
        return nn.LayerNorm(list(layer["normalized_shape"]), eps=float(layer.get("eps", 1e-5)),
                            elementwise_affine=bool(layer.get("elementwise_affine", True)))
    if kind == "flatten":
        return nn.Flatten(int(layer.get("start_dim", 1)), int(layer.get("end_dim", -1)))
    if kind == "symlog":
        return Symlog()
    if kind == "append_constant":
        values = layer.get("values")
        if not isinstance(values, list) or not values or not all(isinstance(v, (int, float)) for v in values):
            raise ArtifactError(f"{where}: append_constant needs 'values', a non-empty list of numbers, got "
                                f"{values!r}")
        return AppendConstant(values)
    simple: dict[str, Callable[[], nn.Module]] = {
        "tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU, "sigmoid": nn.Sigmoid, "identity": nn.Identity,
        "gelu": lambda: nn.GELU(approximate=str(layer.get("approximate", "none"))),
        "elu": lambda: nn.ELU(alpha=float(layer.get("alpha", 1.0))),
        "leaky_relu": lambda: nn.LeakyReLU(float(layer.get("negative_slope", 0.01))),
        "softplus": lambda: nn.Softplus(float(layer.get("beta", 1.0)), float(layer.get("threshold", 20.0))),
    }
    if kind in simple:
        return simple[kind]()
    raise ArtifactError(f"{where}: unknown layer type {kind!r}; this version rebuilds linear, layer_norm, "
                        f"group_norm, channel_layer_norm, flatten, append_constant, conv2d, max_pool2d, image_input, "
                        f"rescale, residual, symlog and "
                        f"{', '.join(sorted(simple))}")


def _read_yaml(path: Path, multi_agent: bool = False) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"inference artifacts: {str(path)!r} is missing; the folder must hold the "
                                f"{INFERENCE_FILE} written by rlox's TrainingArtifacts")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ArtifactError(f"{str(path)!r} is not valid YAML: {first}") from None
    if not isinstance(data, dict) or data.get("format") != INFERENCE_FORMAT:
        raise ArtifactError(f"{str(path)!r} is not an rlox inference file (no 'format: {INFERENCE_FORMAT}')")
    if int(data.get("version", 0)) > INFERENCE_VERSION:
        raise ArtifactError(f"{str(path)!r} has version {data.get('version')}, newer than this reader "
                            f"({INFERENCE_VERSION}); upgrade rlox")
    if data.get("multi_agent") is not None and not multi_agent:
        raise ArtifactError(f"{str(path)!r} describes a multi-agent policy (agents "
                            f"{list((data['multi_agent'] or {}).get('agents') or [])}); load it with "
                            f"MultiAgentInferencePolicy.load({str(path.parent)!r}), or one agent's policy with "
                            f"InferencePolicy.load({str(path.parent / 'agents' / '<agent>')!r})")
    if multi_agent:
        return data
    for key in ("observation_space", "action_space", "policy"):
        if not isinstance(data.get(key), dict):
            raise ArtifactError(f"{str(path)!r} lacks the {key!r} section")
    return data


def _load_param(param: nn.Parameter, weights: Mapping[str, torch.Tensor], key: str, weights_path: Path,
                what: str = "") -> None:
    """Copy ``weights[key]`` into ``param``, or an ArtifactError naming the file and the tensor."""
    if key not in weights:
        raise ArtifactError(f"{str(weights_path)!r} lacks tensor {key!r} {what}that {INFERENCE_FILE} describes; "
                            f"the two files are from different runs or corrupt")
    if tuple(weights[key].shape) != tuple(param.shape):
        raise ArtifactError(f"{str(weights_path)!r}: tensor {key!r} has shape {tuple(weights[key].shape)}, "
                            f"{INFERENCE_FILE} describes {tuple(param.shape)}")
    with torch.no_grad():
        param.copy_(weights[key])


def _read_tensors(path: Path, what: str) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if not path.is_file():
        raise FileNotFoundError(f"inference artifacts: {str(path)!r} ({what}) is missing")
    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ArtifactError(f"{str(path)!r} ({what}) is corrupt or not a safetensors file: {first}") from None


def _positive_int(section: Mapping[str, Any], key: str, where: str) -> int:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArtifactError(f"{where}: the recurrent section needs {key!r} as a positive int, got {value!r}")
    return value


def _build_core(section: Any, networks: Mapping[str, nn.Module], weights: Mapping[str, torch.Tensor],
                yaml_path: Path, weights_path: Path, spec: Mapping[str, Any]) -> nn.Module:
    """The recurrent core ``policy.recurrent`` describes (weights copied in), checked against
    the observation and action spaces."""
    where = f"{str(yaml_path)!r} policy.recurrent"
    if not isinstance(section, dict) or section.get("type") not in RECURRENT_TYPES:
        kind = section.get("type") if isinstance(section, dict) else section
        raise ArtifactError(f"{where}: type {kind!r} is not one of {list(RECURRENT_TYPES)}")
    obs_dim = int(np.prod(spec["observation_space"].get("shape") or [1]))
    act = spec["action_space"]
    dist = spec["policy"]["distribution"]
    if section["type"] == "lstm":
        size = _positive_int(section, "input_size", where)
        if size != obs_dim:
            raise ArtifactError(f"{where}: the LSTM reads {size} inputs, the observations have {obs_dim}")
        core = LSTMCore(size, _positive_int(section, "hidden_size", where),
                        _positive_int(section, "num_layers", where), bool(section.get("bias", True)))
        for pname, param in core.lstm.named_parameters():
            _load_param(param, weights, f"recurrent.{pname}", weights_path, "of the LSTM ")
        return core
    roles = {}
    for role in ("encoder", "img_in", "gru", "posterior"):
        name = section.get(role)
        if name not in networks:
            raise ArtifactError(f"{where}: {role!r} must name one of the networks {sorted(networks)}, got {name!r}")
        roles[role] = networks[name]
    first = next(iter(roles["encoder"]), None)
    obs_shape = tuple(int(s) for s in spec["observation_space"].get("shape") or ())
    if isinstance(first, ImageInput) and first.obs_shape != obs_shape:
        raise ArtifactError(f"{where}: the encoder's image_input reads frames of shape {first.obs_shape}, the "
                            f"observation space has {obs_shape}")
    if dist not in VERSION_2_DISTRIBUTIONS:
        raise ArtifactError(f"{where}: an rssm feeds its action back and needs distribution "
                            f"{' or '.join(VERSION_2_DISTRIBUTIONS)}, got {dist!r}")
    action_dim = _positive_int(section, "action_dim", where)
    want = int(act.get("n", 0)) if act.get("type") == "discrete" else int(np.prod(act.get("shape") or [1]))
    if action_dim != want:
        raise ArtifactError(f"{where}: action_dim {action_dim} does not match the action space ({want})")
    unimix = section.get("unimix", 0.0)
    if not isinstance(unimix, (int, float)) or isinstance(unimix, bool) or not 0.0 <= unimix < 1.0:
        raise ArtifactError(f"{where}: unimix must be a number in [0, 1), got {unimix!r}")
    return RSSMCore(**roles, deter=_positive_int(section, "deter", where),
                    groups=_positive_int(section, "groups", where), classes=_positive_int(section, "classes", where),
                    unimix=float(unimix), action_dim=action_dim)


_RAW_KINDS = ("discrete", "multi_discrete", "multi_binary", "box")


class RawObservationEncoder:
    """Discrete, MultiDiscrete, MultiBinary and Tuple observations -> one float32 vector, from the
    plain description ``rlox.multi_input.raw_space_spec`` writes (``inference.yaml``'s
    ``raw_observation_space``): Discrete and MultiDiscrete one-hot, MultiBinary and Box parts
    reshaped, a Tuple's parts concatenated in order. It is the encoding itself:
    ``rlox.multi_input.ObsLayout`` (training, ``predict``) calls it too, and this module keeps
    importing no other rlox code.
    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        if not isinstance(spec, Mapping) or spec.get("type") not in (*_RAW_KINDS, "tuple"):
            raise ValueError(f"not an observation space description: {spec!r}")
        self.spec = dict(spec)
        self.is_tuple = spec["type"] == "tuple"
        self.parts = [dict(p) for p in spec["spaces"]] if self.is_tuple else [dict(spec)]
        for p in self.parts:
            if not isinstance(p, Mapping) or p.get("type") not in _RAW_KINDS:
                raise ValueError(f"observation part {p!r} is not one of {list(_RAW_KINDS)}")
        self.label = str(spec.get("label", spec["type"]))
        self.flat_dims = [self._part_dim(p) for p in self.parts]
        self.flat_dim = int(sum(self.flat_dims))

    @staticmethod
    def _part_dim(p: Mapping[str, Any]) -> int:
        if p["type"] == "discrete":
            return int(p["n"])
        if p["type"] == "multi_discrete":
            return int(np.sum(p["nvec"]))
        return int(np.prod(p["shape"]))

    @staticmethod
    def part_ndim(p: Mapping[str, Any]) -> int:
        """Dimensions of one (unbatched) value of a part's description."""
        if p["type"] == "discrete":
            return 0
        return int(np.asarray(p["nvec"]).ndim) if p["type"] == "multi_discrete" else len(p["shape"])

    def is_raw(self, obs: Any) -> bool:
        """Whether ``obs`` is in the space's own form (ints, tuples) rather than already flat floats."""
        if isinstance(obs, (tuple, list)) and self.is_tuple:
            return True
        arr = np.asarray(obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else obs)
        return arr.dtype.kind in "biu" and not self.is_tuple

    @staticmethod
    def encode_part(p: Mapping[str, Any], v: np.ndarray, n: int, what: str, batched: bool) -> np.ndarray:
        """``n`` values ``v`` of the part described by ``p`` -> float32 ``[n, part's flat size]``;
        out-of-range integers and wrong sizes are refused, naming ``what``."""
        label = p.get("label", p["type"])
        if p["type"] == "discrete":
            if v.size != n:
                raise ValueError(f"{what} has shape {v.shape}; expected one integer{' per row' if batched else ''} "
                                 f"for {label}")
            idx = v.reshape(n).astype(np.int64) - int(p.get("start", 0))
            if (idx < 0).any() or (idx >= int(p["n"])).any():
                raise ValueError(f"{what} holds {v.reshape(-1)[:4]}, outside {label}")
            out = np.zeros((n, int(p["n"])), np.float32)
            out[np.arange(n), idx] = 1.0
            return out
        shape = tuple(np.asarray(p["nvec"]).shape) if p["type"] == "multi_discrete" else tuple(p["shape"])
        per = f"{' per row' if batched else ' (or a batch [B, ...])'}"
        if p["type"] == "multi_discrete":
            nvec = np.asarray(p["nvec"], np.int64).reshape(-1)
            if v.size != n * nvec.size:
                raise ValueError(f"{what} has shape {v.shape}, expected {shape}{per}")
            vals = v.reshape(n, -1).astype(np.int64) - np.asarray(p.get("start", 0), np.int64).reshape(-1)
            if (vals < 0).any() or (vals >= nvec).any():
                raise ValueError(f"{what} holds {v.reshape(-1)[:4]}, outside {label}")
            offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
            out = np.zeros((n, int(nvec.sum())), np.float32)
            out[np.arange(n)[:, None], offsets + vals] = 1.0
            return out
        want = int(np.prod(shape))
        if v.size != n * want:
            raise ValueError(f"{what} has shape {v.shape}, expected {shape}{per}")
        return v.reshape(n, want).astype(np.float32, copy=False)

    def flatten(self, obs: Any) -> np.ndarray:
        """One raw observation -> float32 ``[flat_dim]``; a batch (Discrete: ints ``[B]``; Multi*:
        ``[B, ...]``; Tuple: a tuple of batched parts) -> ``[B, flat_dim]``."""
        if self.is_tuple:
            if not isinstance(obs, (tuple, list)) or len(obs) != len(self.parts):
                raise ValueError(f"the observation should be a tuple of {len(self.parts)} parts for {self.label}, "
                                 f"got {type(obs).__name__}")
            values = [np.asarray(v) for v in obs]
        else:
            values = [np.asarray(obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else obs)]
        batched = values[0].ndim == self.part_ndim(self.parts[0]) + 1
        n = values[0].shape[0] if batched else 1
        flat = np.concatenate([self.encode_part(p, v, n, f"observation part {i}" if self.is_tuple else "the observation",
                                          batched) for i, (p, v) in enumerate(zip(self.parts, values))], axis=1)
        return flat if batched else flat[0]


class InferencePolicy:
    """A policy rebuilt from an artifacts folder; ``act`` maps raw observations to env actions.

    Use ``InferencePolicy.load(directory)``. Observations are normalised with the saved
    statistics (frozen) when training normalised them; continuous actions are clipped to the
    action space (``gaussian``, ``deterministic``) or squashed into it (``squashed_gaussian``).

    Attributes:
        spec: the parsed ``inference.yaml``; ``directory``; ``obs_shape``; ``discrete``.
    """

    def __init__(self, spec: Mapping[str, Any], networks: Mapping[str, nn.Module],
                 tensors: Mapping[str, torch.Tensor], normalizer: Mapping[str, Any] | None,
                 directory: Path | None = None, seed: int | None = None) -> None:
        self.spec = dict(spec)
        self.directory = directory
        self.networks = nn.ModuleDict(dict(networks)).eval()
        self.tensors = dict(tensors)
        self.normalizer = normalizer
        pol = spec["policy"]
        self.distribution: str = pol["distribution"]
        self.outputs: dict[str, list[str]] = {k: list(v) for k, v in pol["outputs"].items()}
        obs = spec["observation_space"]
        self.obs_shape = tuple(int(s) for s in obs.get("shape", ()))
        act = spec["action_space"]
        self.discrete = act.get("type") == "discrete"
        self.action_start = int(act.get("start", 0)) if self.discrete else 0
        if not self.discrete:
            self.action_shape = tuple(int(s) for s in act["shape"])
            self.low = np.asarray(act["low"], dtype=np.float64).reshape(self.action_shape)
            self.high = np.asarray(act["high"], dtype=np.float64).reshape(self.action_shape)
        self.unimix = float((pol.get("distribution_args") or {}).get("unimix", 0.0))
        #: ``RawObservationEncoder`` of a policy trained on Discrete / MultiDiscrete / MultiBinary /
        #: Tuple observations (they are one-hot encoded here, as in training), else None.
        self.obs_layout = None
        if spec.get("raw_observation_space") is not None:
            try:
                self.obs_layout = RawObservationEncoder(spec["raw_observation_space"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ArtifactError(f"inference.yaml: raw_observation_space is not a valid space description: "
                                    f"{exc}") from None
            if (self.obs_layout.flat_dim,) != self.obs_shape:
                raise ArtifactError(f"inference.yaml: raw_observation_space flattens to {self.obs_layout.flat_dim} "
                                    f"values, but observation_space has shape {list(self.obs_shape)}")
        self.generator = torch.Generator().manual_seed(int(seed) if seed is not None else
                                                       int.from_bytes(os.urandom(4), "little"))

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, directory: str | os.PathLike, *, seed: int | None = None) -> "InferencePolicy":
        """Rebuild the policy from ``directory`` (``inference.yaml`` and the files it names).

        Args:
            seed: seed of stochastic actions (``act(obs, deterministic=False)``).

        Raises:
            FileNotFoundError: the folder or a file it needs is missing (named in the message).
            ArtifactError: a file is corrupt or does not match ``inference.yaml`` (named).
        """
        root = Path(directory)
        if not root.is_dir():
            raise FileNotFoundError(f"inference artifacts folder {str(root)!r} does not exist")
        yaml_path = root / INFERENCE_FILE
        spec = _read_yaml(yaml_path)
        pol = spec["policy"]
        dist = pol.get("distribution")
        if dist not in DISTRIBUTIONS:
            raise ArtifactError(f"{str(yaml_path)!r}: policy distribution {dist!r} is not one of "
                                f"{sorted(DISTRIBUTIONS)}")
        if not isinstance(pol.get("networks"), dict) or not isinstance(pol.get("outputs"), dict):
            raise ArtifactError(f"{str(yaml_path)!r}: the policy section needs 'networks' and 'outputs' mappings")
        weights_path = root / str(pol.get("weights", ACTOR_FILE))
        weights = _read_tensors(weights_path, "policy weights")
        networks: dict[str, nn.Module] = {}
        used: set[str] = set()
        for name, layers in pol["networks"].items():
            if not isinstance(layers, list):
                raise ArtifactError(f"{str(yaml_path)!r}: network {name!r} must be a list of layers")
            modules = [_build_layer(layer if isinstance(layer, dict) else {}, f"{yaml_path} network {name!r} "
                                    f"layer {i}") for i, layer in enumerate(layers)]
            net = nn.Sequential(*modules)
            for i, m in enumerate(modules):
                for pname, param in m.named_parameters():
                    key = f"{name}.{i}.{pname}"
                    _load_param(param, weights, key, weights_path)
                    used.add(key)
            networks[name] = net
        tensors = {}
        for name in pol.get("tensors") or []:
            if name not in weights:
                raise ArtifactError(f"{str(weights_path)!r} lacks tensor {name!r} named in {INFERENCE_FILE}")
            tensors[name] = weights[name]
        for out, chain in pol["outputs"].items():
            missing = [n for n in chain if n not in networks]
            if missing:
                raise ArtifactError(f"{str(yaml_path)!r}: output {out!r} uses unknown networks {missing}")
        for need in DISTRIBUTIONS[dist]:
            if need not in pol["outputs"] and need not in tensors:
                raise ArtifactError(f"{str(yaml_path)!r}: distribution {dist!r} needs {need!r} as an output "
                                    f"or a tensor")
        dist_args = pol.get("distribution_args") or {}
        unimix = dist_args.get("unimix", 0.0) if isinstance(dist_args, dict) else None
        if not isinstance(unimix, (int, float)) or isinstance(unimix, bool) or not 0.0 <= unimix < 1.0:
            raise ArtifactError(f"{str(yaml_path)!r}: policy.distribution_args must be a mapping whose 'unimix' "
                                f"is a number in [0, 1), got {dist_args!r}")
        kinds = {"unimix_categorical": "discrete", "bounded_normal": "box"}
        if dist in kinds and spec["action_space"].get("type") != kinds[dist]:
            raise ArtifactError(f"{str(yaml_path)!r}: distribution {dist!r} needs a {kinds[dist]} action space, "
                                f"got {spec['action_space'].get('type')!r}")
        core = None
        if pol.get("recurrent") is not None:
            core = _build_core(pol["recurrent"], networks, weights, yaml_path, weights_path, spec)
        elif issubclass(cls, RecurrentInferencePolicy):
            raise ArtifactError(f"{str(yaml_path)!r} describes a feed-forward policy (no policy.recurrent "
                                f"section); load it with InferencePolicy.load({str(root)!r})")
        log_std = tensors.get("log_std")
        if log_std is not None and log_std.dim() == 2 and "sde_latent" not in pol["outputs"]:
            raise ArtifactError(f"{str(yaml_path)!r}: a 2-D log_std {tuple(log_std.shape)} is gSDE's and needs an "
                                f"'sde_latent' output (the actor's last hidden features); the file is corrupt "
                                f"or from another rlox version")
        norm_spec = spec.get("observation_normalization") or {}
        normalizer = None
        if norm_spec.get("enabled"):
            norm_path = root / str(norm_spec.get("file", NORMALIZER_FILE))
            stats = _read_tensors(norm_path, "observation statistics")
            if "mean" not in stats or "var" not in stats:
                raise ArtifactError(f"{str(norm_path)!r} must hold 'mean' and 'var' tensors, got {sorted(stats)}")
            dim = int(np.prod(spec["observation_space"].get("shape", [1])))
            if stats["mean"].numel() != dim or stats["var"].numel() != dim:
                raise ArtifactError(f"{str(norm_path)!r} holds statistics of {stats['mean'].numel()} dims; the "
                                    f"observations have {dim}")
            normalizer = {"mean": stats["mean"].double().numpy().reshape(-1),
                          "var": stats["var"].double().numpy().reshape(-1),
                          "clip": float(norm_spec.get("clip", math.inf)),
                          "epsilon": float(norm_spec.get("epsilon", 1e-8))}
        if core is not None:
            policy = RecurrentInferencePolicy(spec, networks, tensors, normalizer, core=core, directory=root,
                                              seed=seed)
            policy.check_networks(yaml_path)
            return policy
        return cls(spec, networks, tensors, normalizer, directory=root, seed=seed)

    # ------------------------------------------------------------------ acting
    def normalize(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` [B, *obs] normalised with the saved statistics (float32)."""
        if self.normalizer is None:
            return obs.astype(np.float32, copy=False)
        n = self.normalizer
        flat = obs.reshape(obs.shape[0], -1).astype(np.float64)
        out = (flat - n["mean"]) / np.sqrt(n["var"] + n["epsilon"])
        if math.isfinite(n["clip"]):
            out = np.clip(out, -n["clip"], n["clip"])
        return out.astype(np.float32).reshape(obs.shape)

    def _outputs(self, x: torch.Tensor, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
        cache: dict[tuple[str, ...], torch.Tensor] = {}
        out = {}
        for name in names:
            if name in self.tensors and name not in self.outputs:
                out[name] = self.tensors[name]
                continue
            y, prefix = x, ()
            for net in self.outputs[name]:
                prefix = (*prefix, net)
                if prefix not in cache:
                    cache[prefix] = self.networks[net](y)
                y = cache[prefix]
            out[name] = y
        return out

    def _check_obs(self, obs: Any) -> tuple[np.ndarray, bool]:
        if self.obs_layout is not None and self.obs_layout.is_raw(obs):
            obs = self.obs_layout.flatten(obs)    # an integer / tuple observation, as the env gives it
        arr = np.asarray(obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else obs)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"obs must hold numbers, got dtype {arr.dtype}")
        if arr.shape == self.obs_shape:
            return arr.reshape(1, *self.obs_shape), True
        if arr.ndim == len(self.obs_shape) + 1 and arr.shape[1:] == self.obs_shape:
            return arr, False
        hint = ""
        n = len(self.obs_shape)
        if n >= 2 and arr.ndim >= n and arr.shape[arr.ndim - n:] != self.obs_shape \
                and sorted(arr.shape[arr.ndim - n:]) == sorted(self.obs_shape):
            hint = ("; the sizes match in another order: give images laid out as the env gives them "
                    "(e.g. not channel-first for a channel-last env)")
        raise ValueError(f"obs has shape {arr.shape}, expected {self.obs_shape} (one observation) or "
                         f"(B, {', '.join(map(str, self.obs_shape))}) (a batch) for "
                         f"{self.spec.get('env_id') or 'this policy'}{hint}")

    @torch.inference_mode()
    def act(self, obs: Any, deterministic: bool = True) -> Any:
        """Action(s) for one raw observation ``[*obs]`` or a batch ``[B, *obs]``.

        One observation of a discrete policy gives an ``np.int64``; otherwise a NumPy array
        (``[B]`` ints or ``[B, *action_shape]`` floats, ``[*action_shape]`` for one observation).
        """
        batch, single = self._check_obs(obs)
        actions, _ = self._decide(torch.from_numpy(self.normalize(batch)), deterministic)
        return self._unbatch(actions, single)

    def _unbatch(self, actions: np.ndarray, single: bool) -> Any:
        if single:
            a0 = actions[0]
            return np.int64(a0) if self.discrete else a0
        return actions

    def _decide(self, x: torch.Tensor, deterministic: bool) -> tuple[np.ndarray, torch.Tensor | None]:
        """(env actions, the action in the policy's own space or None) for features ``x``: the
        normalised observations, or a recurrent core's output. The policy-space action is what
        DreamerV3's RSSM feeds back (one-hot, or the clipped action in [-1, 1])."""
        dist = self.distribution
        policy_action = None
        if dist == "categorical":
            logits = self._outputs(x, ("logits",))["logits"]
            if deterministic:
                a = logits.argmax(-1)
            else:
                a = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator).squeeze(-1)
            actions = a.numpy().astype(np.int64) + self.action_start
        elif dist == "unimix_categorical":   # as rlox.algorithms.dreamer_v3._Actor
            out = self._outputs(x, ("logits",))["logits"].float()
            if self.unimix > 0:
                out = torch.log((1.0 - self.unimix) * torch.softmax(out, -1) + self.unimix / out.shape[-1])
            probs = torch.log_softmax(out, -1).exp()
            a = probs.argmax(-1) if deterministic else \
                torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)
            # straight-through form, as the trained agent feeds it back (see RSSMCore.features)
            policy_action = torch.nn.functional.one_hot(a, probs.shape[-1]).float() + probs - probs
            actions = a.numpy().astype(np.int64) + self.action_start
        elif dist == "bounded_normal":       # as rlox.algorithms.dreamer_v3._Actor
            mean_raw, std_raw = self._outputs(x, ("mean_std",))["mean_std"].float().chunk(2, -1)
            mean = torch.tanh(mean_raw)
            if deterministic:
                u = mean
            else:
                std = (1.0 - 0.1) * torch.sigmoid(std_raw + 2.0) + 0.1
                u = mean + std * torch.randn(mean.shape, generator=self.generator, dtype=mean.dtype)
            policy_action = u + (u.clamp(-1.0, 1.0) - u)     # training's straight-through clip, bit for bit
            a = policy_action.numpy()
            low, high = self.low.reshape(-1).astype(np.float32), self.high.reshape(-1).astype(np.float32)
            finite = np.isfinite(low) & np.isfinite(high)     # unbounded dimensions stay in [-1, 1]
            actions = np.where(finite, low + (a + 1.0) * 0.5 * (high - low), a).astype(np.float32)
            actions = actions.reshape(-1, *self.action_shape)
        elif dist == "greedy":
            actions = self._outputs(x, ("q_values",))["q_values"].argmax(-1).numpy().astype(np.int64) + self.action_start
        elif dist == "deterministic":
            actions = self._bounded(self._outputs(x, ("action",))["action"].double().numpy(), clip=True)
        elif dist == "squashed_deterministic":  # tanh into (-1, 1), then the action bounds (TD3/DDPG)
            t = torch.tanh(self._outputs(x, ("action",))["action"]).double().numpy().reshape(-1, *self.action_shape)
            actions = (self.low + 0.5 * (t + 1.0) * (self.high - self.low)).astype(np.float32)
        else:
            o = self._outputs(x, ("mean", "log_std"))
            mean = o["mean"]
            if deterministic:
                u = mean
            else:
                log_std = o["log_std"]
                if "sde_latent" in self.outputs:  # gSDE (Raffin et al., 2021): sigma_k(s)^2 = sum_j z_j(s)^2 exp(2 log_std_jk)
                    latent = self._outputs(x, ("sde_latent",))["sde_latent"]
                    std = torch.sqrt((latent ** 2) @ torch.exp(2 * log_std) + _SDE_EPS)
                else:
                    std = log_std.exp().expand_as(mean)
                u = mean + std * torch.randn(mean.shape, generator=self.generator, dtype=mean.dtype)
            if dist == "gaussian":
                actions = self._bounded(u.double().numpy(), clip=True)
            else:  # squashed: tanh into (-1, 1), then the action bounds
                t = torch.tanh(u).double().numpy().reshape(-1, *self.action_shape)
                actions = (self.low + 0.5 * (t + 1.0) * (self.high - self.low)).astype(np.float32)
        return actions, policy_action

    def _bounded(self, a: np.ndarray, clip: bool) -> np.ndarray:
        a = a.reshape(-1, *self.action_shape)
        return np.clip(a, self.low, self.high).astype(np.float32) if clip else a.astype(np.float32)

    __call__ = act

    def __repr__(self) -> str:
        return (f"InferencePolicy({self.spec.get('algorithm')!r}, env={self.spec.get('env_id')!r}, "
                f"distribution={self.distribution!r}, normalized={self.normalizer is not None})")


class RecurrentInferencePolicy(InferencePolicy):
    """A recurrent policy (``policy.recurrent`` in ``inference.yaml``: RecurrentPPO's LSTM,
    DreamerV3's RSSM) rebuilt from an artifacts folder; ``InferencePolicy.load`` returns one.

    Two ways to act:

    * ``act(obs)`` keeps the state itself, one row per env of the batch (one observation is a
      batch of one). Call ``reset_state()`` when every env starts an episode, ``reset_state([i])``
      or ``reset_state(mask)`` when some do. The first call after ``reset_state()`` (or after
      loading) fixes the batch size; a batch of another size is a ValueError until the next
      ``reset_state()`` (a silent fresh start would hide a mix-up of envs).
    * ``predict(obs, state, episode_start, deterministic=True)`` -> ``(actions, state)``: the
      explicit form of sb3-contrib's ``RecurrentPPO.predict`` (and rlox's; their
      ``deterministic`` defaults to False, this one to True like ``act``); ``state`` is None at
      the start, then what the previous call returned, a tuple of NumPy arrays (``state_names``):
      LSTM ``(h, c)`` each ``[num_layers, B, hidden]``; RSSM ``(h [B, deter], z [B, groups,
      classes], prev_action [B, action_dim])``. ``episode_start [B]`` marks the envs whose
      observation is the first of an episode (their state is reset).

    Attributes: as ``InferencePolicy``, plus ``core`` (``LSTMCore`` / ``RSSMCore``) and
    ``state_names``.
    """

    recurrent = True

    def __init__(self, spec: Mapping[str, Any], networks: Mapping[str, nn.Module],
                 tensors: Mapping[str, torch.Tensor], normalizer: Mapping[str, Any] | None, *, core: nn.Module,
                 directory: Path | None = None, seed: int | None = None) -> None:
        super().__init__(spec, networks, tensors, normalizer, directory=directory, seed=seed)
        self.core = core.eval()
        self.state_names = tuple(core.state_names)
        self._state: tuple[torch.Tensor, ...] | None = None
        self._starts: torch.Tensor | None = None

    def check_networks(self, yaml_path: Path) -> None:
        """Run one deterministic step on zeros: networks whose sizes do not fit together are an
        ``ArtifactError`` at load time instead of a torch error at the first action."""
        try:
            with torch.inference_mode():
                self._step(torch.zeros(1, *self.obs_shape), self._initial(1), torch.ones(1), True)
        except (RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ArtifactError(f"{str(yaml_path)!r}: the recurrent core and the networks do not fit together "
                                f"({first}); the file is corrupt or was edited") from None

    def _initial(self, n: int) -> tuple[torch.Tensor, ...]:
        return tuple(torch.zeros(shape) for shape in self.core.state_shapes(n))

    def initial_state(self, n: int = 1) -> tuple[np.ndarray, ...]:
        """The state of ``n`` envs at an episode start (zeros), in ``predict``'s form."""
        return tuple(t.numpy() for t in self._initial(n))

    def _step(self, x: torch.Tensor, state: tuple[torch.Tensor, ...], starts: torch.Tensor,
              deterministic: bool) -> tuple[np.ndarray, tuple[torch.Tensor, ...]]:
        feat, pending = self.core.features(x, state, starts, deterministic, self.generator)
        actions, policy_action = self._decide(feat, deterministic)
        return actions, self.core.commit(pending, policy_action)

    @torch.inference_mode()
    def act(self, obs: Any, deterministic: bool = True) -> Any:
        """Action(s) for one raw observation ``[*obs]`` or a batch ``[B, *obs]``, carrying each
        env's recurrent state to the next call (see the class docstring)."""
        batch, single = self._check_obs(obs)
        n = batch.shape[0]
        if self._state is None:
            self._state, self._starts = self._initial(n), torch.ones(n)
        held = self._starts.shape[0]
        if n != held:
            raise ValueError(f"act got {n} observation(s) but holds the recurrent state of {held} env(s); call "
                             f"reset_state() to start afresh with another batch size")
        actions, self._state = self._step(torch.from_numpy(self.normalize(batch)), self._state, self._starts,
                                          deterministic)
        self._starts = torch.zeros(n)
        return self._unbatch(actions, single)

    __call__ = act

    def reset_state(self, envs: Any = None) -> None:
        """Start new episodes for ``act``: every env (``envs=None``: the state is dropped, and the
        next call may have any batch size), or some: a boolean mask ``[B]`` or env indices."""
        if envs is None:
            self._state = self._starts = None
            return
        if self._state is None:       # nothing held: the next act starts every env afresh anyway
            return
        n = self._starts.shape[0]
        arr = np.asarray(envs)
        if arr.dtype == bool:
            if arr.shape != (n,):
                raise ValueError(f"reset_state got a mask of shape {arr.shape}, expected ({n},) (one flag per env)")
            idx = np.flatnonzero(arr)
        else:
            if arr.dtype.kind not in "iu" or arr.ndim > 1:
                raise TypeError(f"reset_state takes None, a boolean mask [{n}] or env indices, got {envs!r}")
            idx = arr.reshape(-1)
            bad = idx[(idx < -n) | (idx >= n)]
            if bad.size:
                raise ValueError(f"reset_state: env index {int(bad[0])} is out of range for {n} env(s)")
        starts = self._starts.clone()      # (act's tensors are inference tensors: no in-place update)
        starts[torch.as_tensor(idx, dtype=torch.long)] = 1.0
        self._starts = starts

    @torch.inference_mode()
    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True
                ) -> tuple[Any, tuple[np.ndarray, ...]]:
        """``(actions, new state)`` for ``obs`` (``[*obs]`` or ``[B, *obs]``) seen from ``state``
        (None: a fresh episode), resetting the envs where ``episode_start`` is true (None: none).
        Does not touch ``act``'s own state."""
        batch, single = self._check_obs(obs)
        n = batch.shape[0]
        if state is None:
            tensors = self._initial(n)
        else:
            if not isinstance(state, (tuple, list)) or len(state) != len(self.state_names):
                raise TypeError(f"state must be None or the tuple {self.state_names} predict returned, got "
                                f"{type(state).__name__}")
            tensors = []
            for name, part, want in zip(self.state_names, state, self.core.state_shapes(n)):
                arr = np.asarray(part.detach().cpu() if isinstance(part, torch.Tensor) else part, dtype=np.float32)
                if arr.shape != tuple(want):
                    raise ValueError(f"state {name!r} has shape {arr.shape}, expected {tuple(want)} for {n} "
                                     f"observation(s)")
                tensors.append(torch.from_numpy(arr.copy()))
            tensors = tuple(tensors)
        if episode_start is None:
            starts = torch.ones(n) if state is None else torch.zeros(n)
        else:
            starts = torch.as_tensor(np.asarray(episode_start, dtype=np.float32).reshape(-1))
            if starts.shape[0] != n:
                raise ValueError(f"episode_start has {starts.shape[0]} entries, expected {n} (one per observation)")
        actions, new = self._step(torch.from_numpy(self.normalize(batch)), tensors, starts, deterministic)
        return self._unbatch(actions, single), tuple(t.numpy().copy() for t in new)

    def __repr__(self) -> str:
        return (f"RecurrentInferencePolicy({self.spec.get('algorithm')!r}, env={self.spec.get('env_id')!r}, "
                f"recurrent={self.spec['policy']['recurrent'].get('type')!r}, distribution={self.distribution!r}, "
                f"normalized={self.normalizer is not None})")


class MultiAgentInferencePolicy:
    """A multi-agent policy (MAPPO/IPPO) rebuilt from an artifacts folder: one
    ``InferencePolicy`` per agent, ``act({agent: obs}) -> {agent: action}``.

    Use ``MultiAgentInferencePolicy.load(directory)``. The dict may hold any non-empty subset
    of the agents (PettingZoo leaves out agents that are done); each observation is one
    ``[obs_dim]`` or a batch ``[B, obs_dim]``, as ``InferencePolicy.act`` takes it.

    Attributes:
        spec: the top ``inference.yaml``; agents (names, in the env's order); policies
        ({agent: InferencePolicy}); env_config (the scenario settings the run trained with).
    """

    multi_agent = True

    def __init__(self, spec: Mapping[str, Any], policies: Mapping[str, InferencePolicy],
                 directory: Path | None = None) -> None:
        self.spec = dict(spec)
        self.directory = directory
        self.policies = dict(policies)
        self.agents = list(self.policies)
        self.env_config = dict((spec.get("multi_agent") or {}).get("env_config") or {})
        self.env_id = spec.get("env_id")

    @classmethod
    def load(cls, directory: str | os.PathLike, *, seed: int | None = None) -> "MultiAgentInferencePolicy":
        """Rebuild every agent's policy from ``directory`` (see the module docstring).

        Args:
            seed: seed of stochastic actions; agent ``i`` draws from ``seed + i``.

        Raises:
            FileNotFoundError / ArtifactError: as ``InferencePolicy.load``, naming the file.
        """
        root = Path(directory)
        if not root.is_dir():
            raise FileNotFoundError(f"inference artifacts folder {str(root)!r} does not exist")
        yaml_path = root / INFERENCE_FILE
        spec = _read_yaml(yaml_path, multi_agent=True)
        section = spec.get("multi_agent")
        if not isinstance(section, dict):
            raise ArtifactError(f"{str(yaml_path)!r} describes a single-agent policy (no 'multi_agent' section); "
                                f"load it with InferencePolicy.load({str(root)!r})")
        agents, folders = section.get("agents"), section.get("policies")
        if not isinstance(agents, list) or not agents or not isinstance(folders, dict):
            raise ArtifactError(f"{str(yaml_path)!r}: the multi_agent section needs 'agents' (a non-empty list) "
                                f"and 'policies' (agent -> folder)")
        missing = [a for a in agents if a not in folders]
        if missing:
            raise ArtifactError(f"{str(yaml_path)!r}: no policy folder for agents {missing}")
        policies = {}
        for i, a in enumerate(agents):
            sub = Path(str(folders[a]))
            if sub.is_absolute() or ".." in sub.parts:
                raise ArtifactError(f"{str(yaml_path)!r}: policy folder {str(sub)!r} of {a!r} must be a path "
                                    f"inside the artifacts folder")
            policies[str(a)] = InferencePolicy.load(root / sub, seed=None if seed is None else int(seed) + i)
        return cls(spec, policies, directory=root)

    def act(self, obs: Any, deterministic: bool = True) -> dict[str, Any]:
        """``{agent: observation}`` -> ``{agent: action}`` (see ``InferencePolicy.act``)."""
        if not isinstance(obs, Mapping):
            raise TypeError(f"obs must be a dict {{agent: observation}} for agents {self.agents}, got "
                            f"{type(obs).__name__}")
        if not obs:
            raise ValueError(f"obs is an empty dict; expected observations for some of {self.agents}")
        unknown = [a for a in obs if a not in self.policies]
        if unknown:
            raise ValueError(f"obs holds unknown agent(s) {unknown}; the agents are {self.agents}")
        out = {}
        for a, o in obs.items():
            try:
                out[a] = self.policies[a].act(o, deterministic)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"agent {a!r}: {exc}") from None
        return out

    def predict(self, obs: Any, deterministic: bool = True) -> dict[str, Any]:
        """``act`` under the name rlox's models use (so ``evaluate_policy`` takes this policy)."""
        return self.act(obs, deterministic)

    __call__ = act

    def __repr__(self) -> str:
        return (f"MultiAgentInferencePolicy({self.spec.get('algorithm')!r}, env={self.env_id!r}, "
                f"agents={self.agents})")


class InferenceRunner:
    """Drive an env with an ``InferencePolicy``: ``step()`` one action, ``run_episode()`` a whole one.

    Args:
        policy: the policy (or use ``InferenceRunner.load(directory, env)``).
        env: a gymnasium env or id (default: the ``env_id`` recorded in ``inference.yaml``);
            None with ``obs=`` for a control loop outside an env (then use ``act``).
        deterministic: greedy / mean actions (default True).
        obs: the first raw observation, for a control loop without an env.

    Attributes:
        obs: the current raw observation; episode_return, episode_length of the running episode.
    """

    def __init__(self, policy: InferencePolicy, env: Any = None, *, deterministic: bool = True,
                 obs: Any = None) -> None:
        self.policy = policy
        self.deterministic = bool(deterministic)
        self._owned = False
        if env is None and obs is None:
            env = policy.spec.get("env_id")
            if env is None:
                raise ValueError("inference.yaml records no env_id; pass env= (a gymnasium env or id)")
        if isinstance(env, str):
            import gymnasium as gym

            env, self._owned = gym.make(env), True
        self.env = env
        self.obs = None if obs is None else np.asarray(obs)
        self.episode_return = 0.0
        self.episode_length = 0

    @classmethod
    def load(cls, directory: str | os.PathLike, env: Any = None, **kwargs: Any) -> "InferenceRunner":
        """``InferenceRunner(InferencePolicy.load(directory), env, **kwargs)``."""
        seed = kwargs.pop("seed", None)
        return cls(InferencePolicy.load(directory, seed=seed), env, **kwargs)

    load_from_env = load

    def act(self, obs: Any = None) -> Any:
        """The action for ``obs`` (default: the current observation)."""
        obs = self.obs if obs is None else np.asarray(obs)
        if obs is None:
            raise RuntimeError("no observation yet: call reset() (or pass obs=)")
        return self.policy.act(obs, self.deterministic)

    def _require_env(self) -> Any:
        if self.env is None:
            raise RuntimeError("this runner has no env; use act(obs) in your control loop, or pass env=")
        return self.env

    def reset(self, seed: int | None = None) -> np.ndarray:
        obs, _ = self._require_env().reset(seed=seed)
        if getattr(self.policy, "recurrent", False):   # a new episode: forget the last one's state
            self.policy.reset_state()
        self.obs = np.asarray(obs)
        self.episode_return, self.episode_length = 0.0, 0
        return self.obs

    def step(self) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Act on the current observation (resetting first if there is none) and step the env.

        Returns gymnasium's ``(obs, reward, terminated, truncated, info)``; after an episode
        ends the next ``step`` starts a new one.
        """
        env = self._require_env()
        if self.obs is None:
            self.reset()
        action = self.act()
        obs, reward, terminated, truncated, info = env.step(action)
        self.obs = np.asarray(obs)
        self.episode_return += float(reward)
        self.episode_length += 1
        if terminated or truncated:
            self.obs = None
        return np.asarray(obs), float(reward), bool(terminated), bool(truncated), info

    def run_episode(self, seed: int | None = None, max_steps: int | None = None) -> dict[str, Any]:
        """Reset and run one episode; returns ``{'return': ..., 'length': ...}``."""
        self.reset(seed=seed)
        while True:
            _, _, terminated, truncated, _ = self.step()
            if terminated or truncated or (max_steps is not None and self.episode_length >= max_steps):
                break
        result = {"return": self.episode_return, "length": self.episode_length}
        self.obs = None
        return result

    def close(self) -> None:
        if self._owned and self.env is not None:
            self.env.close()
