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
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch
from torch import nn

__all__ = ["InferencePolicy", "MultiAgentInferencePolicy", "InferenceRunner", "ArtifactError", "AppendConstant",
           "ImageInput", "Residual", "INFERENCE_FILE", "ACTOR_FILE", "NORMALIZER_FILE", "DISTRIBUTIONS"]

INFERENCE_FORMAT = "rlox-inference"
INFERENCE_VERSION = 1
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
}


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
    in ``inference.yaml``, with ``obs_shape`` and ``layout``; ``rlox.cnn``'s extractors start with it."""

    def __init__(self, obs_shape: Any, layout: str) -> None:
        super().__init__()
        shape = tuple(int(d) for d in obs_shape)
        if layout not in IMAGE_LAYOUTS or len(shape) != len(layout) or min(shape, default=0) < 1:
            raise ValueError(f"ImageInput needs a layout in {IMAGE_LAYOUTS} and an obs_shape of as many positive "
                             f"sizes, got layout {layout!r} and obs_shape {obs_shape!r}")
        self.obs_shape, self.layout = shape, layout
        if layout == "hw":
            self.chw = (1, shape[0], shape[1])
        elif layout == "hwc":
            self.chw = (shape[2], shape[0], shape[1])
        else:
            self.chw = shape

    @property
    def channels_last(self) -> bool:
        return self.layout == "hwc"

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float().reshape(-1, *self.obs_shape)     # (flat [B, C*H*W] rows from a replay buffer too)
        if self.layout == "hw":
            x = x.unsqueeze(-3)
        elif self.layout == "hwc":
            x = x.movedim(-1, -3)
        # Channels-last activations: oneDNN's convolutions run ~1.3x faster on them on CPU
        # (NatureCNN forward+backward, batch 256, one thread: 390 -> 303 ms); same values.
        return (x.reshape(-1, *self.chw) * (1.0 / 255.0)).contiguous(memory_format=torch.channels_last)


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
        try:
            return ImageInput(layer.get("obs_shape") or (), str(layer.get("layout")))
        except (TypeError, ValueError) as exc:
            raise ArtifactError(f"{where}: {exc}") from None
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
                        f"flatten, append_constant, conv2d, max_pool2d, image_input, residual and "
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
                    if key not in weights:
                        raise ArtifactError(f"{str(weights_path)!r} lacks tensor {key!r} that {INFERENCE_FILE} "
                                            f"describes; the two files are from different runs or corrupt")
                    if tuple(weights[key].shape) != tuple(param.shape):
                        raise ArtifactError(f"{str(weights_path)!r}: tensor {key!r} has shape "
                                            f"{tuple(weights[key].shape)}, {INFERENCE_FILE} describes "
                                            f"{tuple(param.shape)}")
                    with torch.no_grad():
                        param.copy_(weights[key])
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
        arr = np.asarray(obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else obs)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"obs must hold numbers, got dtype {arr.dtype}")
        if arr.shape == self.obs_shape:
            return arr.reshape(1, *self.obs_shape), True
        if arr.ndim == len(self.obs_shape) + 1 and arr.shape[1:] == self.obs_shape:
            return arr, False
        raise ValueError(f"obs has shape {arr.shape}, expected {self.obs_shape} (one observation) or "
                         f"(B, {', '.join(map(str, self.obs_shape))}) (a batch) for "
                         f"{self.spec.get('env_id') or 'this policy'}")

    @torch.inference_mode()
    def act(self, obs: Any, deterministic: bool = True) -> Any:
        """Action(s) for one raw observation ``[*obs]`` or a batch ``[B, *obs]``.

        One observation of a discrete policy gives an ``np.int64``; otherwise a NumPy array
        (``[B]`` ints or ``[B, *action_shape]`` floats, ``[*action_shape]`` for one observation).
        """
        batch, single = self._check_obs(obs)
        x = torch.from_numpy(self.normalize(batch))
        dist = self.distribution
        if dist == "categorical":
            logits = self._outputs(x, ("logits",))["logits"]
            if deterministic:
                a = logits.argmax(-1)
            else:
                a = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator).squeeze(-1)
            actions = a.numpy().astype(np.int64) + self.action_start
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
        if single:
            a0 = actions[0]
            return np.int64(a0) if self.discrete else a0
        return actions

    def _bounded(self, a: np.ndarray, clip: bool) -> np.ndarray:
        a = a.reshape(-1, *self.action_shape)
        return np.clip(a, self.low, self.high).astype(np.float32) if clip else a.astype(np.float32)

    __call__ = act

    def __repr__(self) -> str:
        return (f"InferencePolicy({self.spec.get('algorithm')!r}, env={self.spec.get('env_id')!r}, "
                f"distribution={self.distribution!r}, normalized={self.normalizer is not None})")


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
