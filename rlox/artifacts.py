"""Training artifacts: the best policy, ready for inference, and how the run went.

    trainer = Trainer("ppo", env="CartPole-v1", artifacts_dir="runs/cartpole")
    trainer.train(50_000)

    runs/cartpole
    ├── actor.safetensors      the best policy so far (by deterministic evaluation)
    ├── normalizer.safetensors observation statistics at that point (only with normalisation)
    ├── inference.yaml         architecture, observation normalisation, action space
    ├── evaluations.csv        step,mean_reward,std_reward,episodes
    ├── training_timings.csv   iteration,collect_ms,learn_ms,evaluate_ms,total_ms
    └── training.yaml          algorithm, env, seed and hyperparameters of the run

``rlox.inference.InferencePolicy.load("runs/cartpole")`` rebuilds the policy from the first
three files with torch alone (no rlox training code). ``inference.yaml`` holds no training
hyperparameters (learning rate, discount, ...); those are in ``training.yaml``.

Recurrent policies (RecurrentPPO's LSTM, DreamerV3's RSSM) add a ``policy.recurrent`` section
and are written as file version 2; feed-forward ones stay version 1; DreamerV3 on images (its
encoder's ``channel_layer_norm`` and ``rescale`` layers) is version 3 (see docs/deploy.md).

``TrainingArtifacts`` is an ``EvalCallback``: it evaluates on a separate env every
``eval_freq`` env steps (default: 20 evaluations over the run, and always at its end), and
writes the actor whenever the mean evaluation reward beats the best so far. Algorithms take
part through ``Algorithm.export_policy()`` (see ``rlox.algorithms.base``).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from rlox.callbacks import EvalCallback
from rlox.checkpointing import atomic_path, atomic_write_text
from rlox.logging import algo_env_label, run_metadata
from rlox.inference import (ACTOR_FILE, DISTRIBUTIONS, INFERENCE_FILE, INFERENCE_FORMAT, NORMALIZER_FILE,
                            RECURRENT_TYPES, VERSION_2_DISTRIBUTIONS, AppendConstant, ArtifactError,
                            ChannelLayerNorm, ImageInput, Rescale, Symlog)

__all__ = ["TrainingArtifacts", "describe_network", "export_inference", "LEARN_PHASES",
           "EVALUATIONS_FILE", "TIMINGS_FILE", "TRAINING_FILE"]

EVALUATIONS_FILE = "evaluations.csv"
TIMINGS_FILE = "training_timings.csv"
TRAINING_FILE = "training.yaml"
#: Phases of ``algo.timings`` counted as learning in ``training_timings.csv``; the rest of an
#: iteration's time is collection.
LEARN_PHASES = ("gradient_update", "learn", "critic_update", "actor_update", "target_update")

_ACTIVATIONS: dict[type, str] = {nn.Tanh: "tanh", nn.ReLU: "relu", nn.GELU: "gelu", nn.SiLU: "silu",
                                 nn.Sigmoid: "sigmoid", nn.Identity: "identity", nn.ELU: "elu",
                                 nn.LeakyReLU: "leaky_relu", nn.Softplus: "softplus"}


def _flat_layers(module: nn.Module) -> list[nn.Module]:
    """``module`` as a flat list of layers: ``nn.Sequential`` is unrolled, and so is any module
    with an ``inference_layers()`` method (``rlox.cnn``'s extractors, ``SharedFeatures``)."""
    if isinstance(module, nn.Sequential):
        return [m for child in module for m in _flat_layers(child)]
    unroll = getattr(module, "inference_layers", None)
    if callable(unroll):
        return [m for child in unroll() for m in _flat_layers(child)]
    return [module]


def describe_network(name: str, module: nn.Module) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """(layer list for ``inference.yaml``, tensors keyed ``<name>.<i>.<param>``) of a
    ``nn.Sequential`` of Linear / LayerNorm / Flatten / activation layers, and of CNNs
    (Conv2d, MaxPool2d, GroupNorm, ``rlox.inference.ImageInput`` and ``Rescale``, residual
    blocks: modules with a ``residual_body()`` method, described as ``x + body(x)``).

    Raises:
        ArtifactError: a layer type ``rlox.inference`` cannot rebuild.
    """
    return _describe_layers(name, name, _flat_layers(module))


def _pair(v: Any) -> list[int]:
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v), int(v)]


def _describe_layers(name: str, prefix: str, modules: list[nn.Module]
                     ) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    layers: list[dict[str, Any]] = []
    tensors: dict[str, torch.Tensor] = {}
    for i, m in enumerate(modules):
        key = f"{prefix}.{i}"
        if isinstance(m, nn.Linear):
            layers.append({"type": "linear", "in_features": m.in_features, "out_features": m.out_features,
                           "bias": m.bias is not None})
            tensors[f"{key}.weight"] = m.weight
            if m.bias is not None:
                tensors[f"{key}.bias"] = m.bias
        elif isinstance(m, nn.Conv2d):
            if m.padding_mode != "zeros" or isinstance(m.padding, str):
                raise ArtifactError(f"network {name!r} layer {key} is a Conv2d with padding {m.padding!r} / "
                                    f"padding_mode {m.padding_mode!r}; inference artifacts describe zero padding "
                                    f"given as ints")
            layers.append({"type": "conv2d", "in_channels": m.in_channels, "out_channels": m.out_channels,
                           "kernel_size": _pair(m.kernel_size), "stride": _pair(m.stride),
                           "padding": _pair(m.padding), "dilation": _pair(m.dilation), "groups": m.groups,
                           "bias": m.bias is not None})
            tensors[f"{key}.weight"] = m.weight
            if m.bias is not None:
                tensors[f"{key}.bias"] = m.bias
        elif isinstance(m, nn.MaxPool2d):
            layers.append({"type": "max_pool2d", "kernel_size": _pair(m.kernel_size),
                           "stride": _pair(m.stride), "padding": _pair(m.padding),
                           "dilation": _pair(m.dilation), "ceil_mode": bool(m.ceil_mode)})
        elif isinstance(m, ImageInput):
            layer = {"type": "image_input", "obs_shape": list(m.obs_shape), "layout": m.layout}
            if not m.scale:           # (written only when off: CNN files stay as they were, version 1)
                layer["scale"] = False
            layers.append(layer)
        elif isinstance(m, Rescale):
            layers.append({"type": "rescale", "divisor": m.divisor, "offset": m.offset})
        elif isinstance(m, ChannelLayerNorm):
            layers.append({"type": "channel_layer_norm", "num_channels": m.num_channels, "eps": m.eps,
                           "affine": m.affine})
            if m.affine:
                tensors[f"{key}.weight"] = m.weight
                tensors[f"{key}.bias"] = m.bias
        elif isinstance(m, nn.GroupNorm):
            layers.append({"type": "group_norm", "num_groups": m.num_groups, "num_channels": m.num_channels,
                           "eps": m.eps, "affine": m.affine})
            if m.affine:
                tensors[f"{key}.weight"] = m.weight
                tensors[f"{key}.bias"] = m.bias
        elif callable(getattr(m, "residual_body", None)):
            sub_layers, sub_tensors = _describe_layers(name, f"{key}.body", list(m.residual_body()))
            layers.append({"type": "residual", "layers": sub_layers})
            tensors.update(sub_tensors)
        elif isinstance(m, nn.LayerNorm):
            layers.append({"type": "layer_norm", "normalized_shape": list(m.normalized_shape), "eps": m.eps,
                           "elementwise_affine": m.elementwise_affine})
            if m.elementwise_affine:
                tensors[f"{key}.weight"] = m.weight
                if m.bias is not None:
                    tensors[f"{key}.bias"] = m.bias
        elif isinstance(m, nn.Flatten):
            layers.append({"type": "flatten", "start_dim": m.start_dim, "end_dim": m.end_dim})
        elif isinstance(m, Symlog):
            layers.append({"type": "symlog"})
        elif isinstance(m, AppendConstant):
            layers.append({"type": "append_constant", "values": [float(v) for v in m.values.tolist()]})
        elif type(m) in _ACTIVATIONS:
            layer: dict[str, Any] = {"type": _ACTIVATIONS[type(m)]}
            if isinstance(m, nn.ELU):
                layer["alpha"] = float(m.alpha)
            elif isinstance(m, nn.LeakyReLU):
                layer["negative_slope"] = float(m.negative_slope)
            elif isinstance(m, nn.Softplus):
                layer.update(beta=float(m.beta), threshold=float(m.threshold))
            elif isinstance(m, nn.GELU):
                layer["approximate"] = m.approximate
            layers.append(layer)
        else:
            raise ArtifactError(f"network {name!r} layer {key.split('.', 1)[1]} is a {type(m).__name__}, which "
                                f"inference artifacts cannot describe; supported: Linear, Conv2d, MaxPool2d, "
                                f"LayerNorm, GroupNorm, ChannelLayerNorm, Flatten, AppendConstant, ImageInput, "
                                f"Rescale, Symlog, "
                                f"residual blocks and "
                                f"{', '.join(sorted(t.__name__ for t in _ACTIVATIONS))}")
    return layers, tensors


def _space_spec(space: Any) -> dict[str, Any]:
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return {"type": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        def bound(a: np.ndarray) -> list:
            return [float(x) for x in np.asarray(a, dtype=np.float64).reshape(-1)]
        return {"type": "box", "shape": [int(s) for s in space.shape], "dtype": str(space.dtype),
                "low": bound(space.low), "high": bound(space.high)}
    raise ArtifactError(f"inference artifacts support Discrete and Box spaces, got {space}")


def _normalizer_state(norm: Any) -> dict[str, Any] | None:
    """Observation statistics of an ``obs_normalizer()`` (``VecNormalize``-like), or None."""
    if norm is None or not getattr(norm, "norm_obs", True):
        return None
    rms = getattr(norm, "obs_rms", None)
    if rms is None:
        return None
    return {"mean": np.asarray(rms.mean(), dtype=np.float64), "var": np.asarray(rms.var(), dtype=np.float64),
            "count": float(rms.count()), "clip": float(getattr(norm, "clip_obs", math.inf)),
            "epsilon": float(getattr(norm, "epsilon", 1e-8))}


def _check_export(export: Mapping[str, Any], owner: str) -> None:
    if "agents" in export:          # multi-agent: one ordinary export per agent
        agents = export["agents"]
        if not isinstance(agents, Mapping) or not agents:
            raise ArtifactError(f"{owner}.export_policy() 'agents' must be a non-empty mapping agent -> export")
        for agent, sub in agents.items():
            for key in ("observation_space", "action_space"):
                if key not in sub:
                    raise ArtifactError(f"{owner}.export_policy() agent {agent!r} lacks {key!r}")
            _check_export(sub, f"{owner} agent {agent!r}")
        return
    dist = export.get("distribution")
    if dist not in DISTRIBUTIONS:
        raise ArtifactError(f"{owner}.export_policy() distribution {dist!r} is not one of {sorted(DISTRIBUTIONS)}")
    networks, outputs = export.get("networks") or {}, export.get("outputs") or {}
    tensors = export.get("tensors") or {}
    for out in DISTRIBUTIONS[dist]:
        if out not in outputs and out not in tensors:
            raise ArtifactError(f"{owner}.export_policy(): distribution {dist!r} needs an output or tensor "
                                f"{out!r}; got outputs {sorted(outputs)} and tensors {sorted(tensors)}")
    for out, chain in outputs.items():
        missing = [n for n in chain if n not in networks]
        if not chain or missing:
            raise ArtifactError(f"{owner}.export_policy(): output {out!r} uses networks {list(chain)}; "
                                f"{missing or 'none'} not in networks {sorted(networks)}")
    rec = export.get("recurrent")
    if rec is not None:
        if not isinstance(rec, Mapping) or rec.get("type") not in RECURRENT_TYPES:
            raise ArtifactError(f"{owner}.export_policy() 'recurrent' must be a mapping with a type in "
                                f"{list(RECURRENT_TYPES)}, got {rec!r}")
        if rec["type"] == "lstm" and not isinstance(rec.get("module"), nn.LSTM):
            raise ArtifactError(f"{owner}.export_policy(): a recurrent 'lstm' needs 'module', a torch.nn.LSTM")
        if rec["type"] == "rssm":
            missing = [r for r in ("encoder", "img_in", "gru", "posterior") if rec.get(r) not in networks]
            if missing:
                raise ArtifactError(f"{owner}.export_policy(): the rssm's {missing} must name networks, got "
                                    f"{[rec.get(r) for r in missing]} (networks {sorted(networks)})")


def _all_layers(module: nn.Module) -> list[nn.Module]:
    """``_flat_layers`` with the bodies of residual blocks unrolled too."""
    out = []
    for m in _flat_layers(module):
        body = getattr(m, "residual_body", None)
        out += [m, *(x for sub in body() for x in _all_layers(sub))] if callable(body) else [m]
    return out


def _file_version(export: Mapping[str, Any]) -> int:
    """The lowest ``inference.yaml`` version that reads ``export``: 3 when a network holds a
    layer new in version 3 (ChannelLayerNorm, GroupNorm, Rescale, ImageInput without scaling:
    DreamerV3's image encoder), 2 for a recurrent policy or a distribution new in version 2, else
    1 (so older readers keep loading the files they can read)."""
    if "agents" in export:
        return max(_file_version(sub) for sub in export["agents"].values())
    if any(isinstance(m, (nn.GroupNorm, ChannelLayerNorm, Rescale))
           or (isinstance(m, ImageInput) and not m.scale)
           for net in export["networks"].values() for m in _all_layers(net)):
        return 3
    return 2 if export.get("recurrent") is not None or export["distribution"] in VERSION_2_DISTRIBUTIONS else 1


def _describe_recurrent(rec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(``policy.recurrent`` section, its tensors) of an export's ``recurrent`` entry."""
    if rec["type"] == "lstm":
        lstm: nn.LSTM = rec["module"]
        if lstm.bidirectional or lstm.proj_size or lstm.batch_first:
            raise ArtifactError(f"inference artifacts describe a one-directional, time-major LSTM without "
                                f"projections; got bidirectional={lstm.bidirectional}, proj_size={lstm.proj_size}, "
                                f"batch_first={lstm.batch_first}")
        section = {"type": "lstm", "input_size": int(lstm.input_size), "hidden_size": int(lstm.hidden_size),
                   "num_layers": int(lstm.num_layers), "bias": bool(lstm.bias)}
        return section, {f"recurrent.{name}": p for name, p in lstm.named_parameters()}
    section = {"type": "rssm", **{k: str(rec[k]) for k in ("encoder", "img_in", "gru", "posterior")},
               **{k: int(rec[k]) for k in ("deter", "groups", "classes", "action_dim")},
               "unimix": float(rec.get("unimix", 0.0))}
    return section, {}


def export_inference(algo: Any, directory: str | os.PathLike, *, extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``actor.safetensors``, ``normalizer.safetensors`` (when observations are normalised)
    and ``inference.yaml`` for ``algo``'s current policy into ``directory``; returns the yaml path.

    A multi-agent algorithm (MAPPO/IPPO: ``export_policy()`` returns ``agents``) gets one such
    set per agent under ``agents/<agent>/`` and a top ``inference.yaml`` listing them
    (``rlox.inference.MultiAgentInferencePolicy`` loads it).

    Each file is written atomically (the previous best stays intact if this crashes).

    Raises:
        ArtifactError: the algorithm does not export its policy (``export_policy()`` is None) or
            its networks hold layers the inference side cannot rebuild.
    """
    import yaml

    owner = type(algo).__name__
    export = algo.export_policy() if callable(getattr(algo, "export_policy", None)) else None
    if export is None:
        raise ArtifactError(f"{owner} does not export its policy (export_policy() returned None), so no "
                            f"inference artifacts can be written; use inference_artifacts=False")
    _check_export(export, owner)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    head = {"format": INFERENCE_FORMAT, "version": _file_version(export),
            "algorithm": getattr(algo, "name", owner) or owner, "env_id": algo_env_label(algo)}
    if "agents" in export:
        folders = {}
        for agent, sub in export["agents"].items():
            folder = f"agents/{agent}"
            if not agent or "/" in agent or "\\" in agent or agent in (".", ".."):
                raise ArtifactError(f"{owner}: agent name {agent!r} cannot be a folder name")
            _write_policy(directory / folder, sub, head, sub["observation_space"], sub["action_space"], None,
                          {"agent": agent, **dict(extra or {})})
            folders[agent] = folder
        env_config = getattr(algo, "env_config", None) or {}
        spec = {**head, "multi_agent": {"agents": list(folders), "policies": folders,
                                        "env_config": _plain(dict(env_config))}, **dict(extra or {})}
        path = directory / INFERENCE_FILE
        atomic_write_text(yaml.safe_dump(spec, sort_keys=False), path)
        return path
    norm = _normalizer_state(algo.obs_normalizer() if callable(getattr(algo, "obs_normalizer", None)) else None)
    from rlox.multi_input import find_obs_layout, raw_space_spec

    layout = find_obs_layout(algo)      # Discrete / Tuple / ... observations: InferencePolicy takes them raw
    if layout is not None:
        extra = {**dict(extra or {}), "raw_observation_space": raw_space_spec(layout.space)}
    return _write_policy(directory, export, head, algo.observation_space, algo.action_space, norm, extra)


def _plain(x: Any) -> Any:
    """``x`` with tuples as lists and NumPy scalars as Python ones (for ``yaml.safe_dump``)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _write_policy(directory: Path, export: Mapping[str, Any], head: Mapping[str, Any], obs_space: Any,
                  act_space: Any, norm: Mapping[str, Any] | None, extra: Mapping[str, Any] | None) -> Path:
    """One policy's ``actor.safetensors`` (+ ``normalizer.safetensors``) and ``inference.yaml``."""
    from safetensors.torch import save_file
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    networks_spec: dict[str, Any] = {}
    tensors: dict[str, torch.Tensor] = {}
    for name, module in export["networks"].items():
        layers, params = describe_network(name, module)
        networks_spec[name] = layers
        tensors.update(params)
    extra_tensors = sorted((export.get("tensors") or {}).keys())
    for name in extra_tensors:
        tensors[name] = export["tensors"][name]
    policy: dict[str, Any] = {"distribution": export["distribution"], "weights": ACTOR_FILE,
                              "networks": networks_spec,
                              "outputs": {k: list(v) for k, v in export["outputs"].items()}, "tensors": extra_tensors}
    if export.get("distribution_args"):
        policy["distribution_args"] = _plain(dict(export["distribution_args"]))
    if export.get("recurrent") is not None:
        policy["recurrent"], rec_tensors = _describe_recurrent(export["recurrent"])
        tensors.update(rec_tensors)
    version = _file_version(export)
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in tensors.items()}
    with atomic_path(directory / ACTOR_FILE) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "rlox-actor", "version": str(version)})
    if norm is not None:
        with atomic_path(directory / NORMALIZER_FILE) as tmp:
            save_file({"mean": torch.from_numpy(norm["mean"]), "var": torch.from_numpy(norm["var"])}, str(tmp),
                      metadata={"format": "rlox-normalizer", "count": repr(norm["count"])})
    spec = {
        **dict(head), "version": version,
        "observation_space": _space_spec(obs_space),
        "action_space": _space_spec(act_space),
        "policy": policy,
        "observation_normalization": (
            {"enabled": True, "file": NORMALIZER_FILE, "clip": norm["clip"], "epsilon": norm["epsilon"]}
            if norm is not None else {"enabled": False}),
        **dict(extra or {}),
    }
    path = directory / INFERENCE_FILE
    atomic_write_text(yaml.safe_dump(spec, sort_keys=False), path)
    return path


class TrainingArtifacts(EvalCallback):
    """Write a run's artifacts into ``directory`` (see the module docstring for the files).

    Args:
        directory: the artifacts folder (created).
        eval_env: env for evaluation (default: a fresh env like the training one).
        eval_freq: env steps between evaluations (default: the run's budget / ``n_evaluations``).
        n_evaluations: evaluations per run when ``eval_freq`` is not given (default 20).
        n_eval_episodes: episodes per evaluation (default 5), deterministic actions by default.
        evaluation_results: write ``evaluations.csv``.
        training_timings: write ``training_timings.csv``.
        inference_artifacts: write the best ``actor.safetensors``, ``normalizer.safetensors``
            and ``inference.yaml``.
        seed: reset seed of the first evaluation episode.

    Attributes:
        directory; best_mean_reward / best_step / evaluations (from ``EvalCallback``).
    """

    def __init__(self, directory: str | os.PathLike, *, eval_env: Any = None, eval_freq: int | None = None,
                 n_evaluations: int = 20, n_eval_episodes: int = 5, deterministic: bool = True,
                 evaluation_results: bool = True, training_timings: bool = True,
                 inference_artifacts: bool = True, seed: int = 0, verbose: int = 0) -> None:
        if isinstance(n_evaluations, bool) or not isinstance(n_evaluations, int) or n_evaluations < 1:
            raise ValueError(f"TrainingArtifacts n_evaluations must be an int >= 1, got {n_evaluations!r}")
        super().__init__(eval_env, eval_freq=1 if eval_freq is None else eval_freq,
                         n_eval_episodes=n_eval_episodes, deterministic=deterministic,
                         log_path=directory if evaluation_results else None, eval_at_end=True, seed=seed,
                         verbose=verbose)
        self.directory = Path(directory)
        self.auto_freq = eval_freq is None
        self.n_evaluations = n_evaluations
        self.evaluation_results = bool(evaluation_results)
        self.training_timings = bool(training_timings)
        self.inference_artifacts = bool(inference_artifacts)
        self._timings_rows = 0
        self._timings_fh: Any = None
        self._timings_csv: Any = None
        self._phase_start: dict[str, float] = {}

    def init_callback(self, algo: Any) -> None:
        super().init_callback(algo)
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.inference_artifacts:
            export = algo.export_policy() if callable(getattr(algo, "export_policy", None)) else None
            if export is None:
                raise ArtifactError(f"{type(algo).__name__} does not export its policy (export_policy() returned "
                                    f"None); pass inference_artifacts=False to TrainingArtifacts")
            _check_export(export, type(algo).__name__)
        if self.auto_freq:
            self.eval_freq = max(1, int(getattr(algo, "remaining_timesteps", 0)) // self.n_evaluations)

    def on_training_start(self) -> None:
        import yaml

        algo = self.algo
        run = run_metadata(algo)
        atomic_write_text(yaml.safe_dump(run, sort_keys=False), self.directory / TRAINING_FILE)
        self._phase_start = dict(algo.timings)

    def on_update(self, metrics: Mapping[str, Any]) -> bool | None:
        before = self.algo.timings.get("evaluation", 0.0)
        keep_going = super().on_update(metrics)
        evaluate_s = self.algo.timings.get("evaluation", 0.0) - before
        if self.training_timings:
            timings = self.algo.timings
            learn = sum(timings.get(k, 0.0) - self._phase_start.get(k, 0.0) for k in LEARN_PHASES)
            self._phase_start = dict(timings)
            iteration = float(metrics.get("time/iteration", 0.0))
            row = {"iteration": int(getattr(self.algo, "iterations", self._timings_rows + 1)),
                   "collect_ms": round(1e3 * max(iteration - learn, 0.0), 3), "learn_ms": round(1e3 * learn, 3),
                   "evaluate_ms": round(1e3 * evaluate_s, 3), "total_ms": round(1e3 * (iteration + evaluate_s), 3)}
            if self._timings_fh is None:   # kept open for the run: one write per iteration
                import csv

                first = self._timings_rows == 0
                self._timings_fh = open(self.directory / TIMINGS_FILE, "w" if first else "a", newline="")
                self._timings_csv = csv.writer(self._timings_fh)
                if first:
                    self._timings_csv.writerow(row)
            self._timings_csv.writerow(row.values())
            self._timings_rows += 1
        return keep_going

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        super().on_training_end(metrics)
        if self._timings_fh is not None:
            self._timings_fh.close()
            self._timings_fh = None

    def _on_evaluated(self, record: Mapping[str, Any], new_best: bool) -> None:
        super()._on_evaluated(record, new_best)
        if new_best and self.inference_artifacts:
            export_inference(self.algo, self.directory,
                             extra={"best": {"step": int(record["step"]),
                                             "mean_reward": float(record["mean_reward"]),
                                             "std_reward": float(record["std_reward"]),
                                             "episodes": int(record["episodes"])}})
