"""Typed algorithm configurations: one dataclass per algorithm.

Every field has a type, a default and a one-line help; numeric ranges and choices are checked
in ``__post_init__`` with a ValueError that names the field, the value and what is allowed.

    from rlox.config import PPOConfig
    cfg = PPOConfig.from_dict({"n_envs": 16, "unknown_key": 42})   # warns, ignores unknown_key
    cfg2 = cfg.merge({"learning_rate": 1e-3})                      # a new, validated config
    cfg.to_dict()                                                  # plain dict (for logs/YAML)

The PPO defaults follow CleanRL's ``ppo.py`` (the user guide's table); A2C follows SB3; the
off-policy ones follow SB3 / the papers, as each field's help says.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, TypeVar

import numpy as np

from rlox.errors import RloxWarning

# The algorithms' configs (every ``CONFIGS`` class) are added at the end of the module.
__all__ = ["ConfigBase", "ConfigWarning", "CONFIGS", "config_for", "TrainingConfig"]

C = TypeVar("C", bound="ConfigBase")


class ConfigWarning(RloxWarning):
    """A config dict held keys the config does not have (they were ignored)."""


def _f(default: Any, help: str, *, gt: float | None = None, ge: float | None = None,
       lt: float | None = None, le: float | None = None, optional: bool = False) -> Any:
    """A dataclass field with its help and numeric bounds in ``metadata``."""
    meta = {"help": help, "gt": gt, "ge": ge, "lt": lt, "le": le, "optional": optional}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return field(default=default, metadata=meta)


def _range_text(m: Mapping[str, Any]) -> str:
    lo = f"> {m['gt']}" if m["gt"] is not None else (f">= {m['ge']}" if m["ge"] is not None else "")
    hi = f"< {m['lt']}" if m["lt"] is not None else (f"<= {m['le']}" if m["le"] is not None else "")
    return " and ".join(p for p in (lo, hi) if p)


@dataclass
class ConfigBase:
    """Shared behaviour of the config dataclasses: validation, from_dict, merge, to_dict."""

    algorithm: ClassVar[str] = ""

    torch_threads: int | None = _f(1, "torch intra-op threads while training; small networks run "
                                   "fastest on one (None: leave torch's setting)", ge=1, optional=True)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            self._check_field(f, hints.get(f.name))
        self.validate()

    def validate(self) -> None:
        """Cross-field checks; subclasses extend (raise ValueError naming the fields)."""

    def _check_field(self, f: dataclasses.Field, hint: Any) -> None:
        value = getattr(self, f.name)
        m = f.metadata
        if value is None:
            if m.get("optional") or _accepts(hint, None):
                return
            raise ValueError(f"{type(self).__name__}.{f.name} must not be None")
        if typing.get_origin(hint) is Literal:
            allowed = typing.get_args(hint)
            if value not in allowed:
                raise ValueError(f"{type(self).__name__}.{f.name} = {value!r} is not allowed; "
                                 f"expected one of {', '.join(repr(a) for a in allowed)}")
            return
        if f.name == "hidden":
            object.__setattr__(self, f.name, _check_hidden(value, type(self).__name__))
            return
        if isinstance(value, (np.generic, float)) and _accepts(hint, 1) and not _accepts(hint, 0.5) \
                and float(value).is_integer():
            value = int(value)                  # 128.0 or np.int64(128) for an int field
            object.__setattr__(self, f.name, value)
        elif isinstance(value, np.generic):
            value = value.item()                # NumPy scalars stored as Python numbers (JSON)
            object.__setattr__(self, f.name, value)
        if not _accepts(hint, value):
            hint_text = f"; pass the number {value}, not the string {value!r}" if (
                isinstance(value, str) and _is_number_text(value)) else ""
            raise ValueError(f"{type(self).__name__}.{f.name} must be {_type_text(hint)}, got "
                             f"{value!r} ({type(value).__name__}){hint_text}")
        if isinstance(f.default, bool) and not isinstance(value, bool):
            raise ValueError(f"{type(self).__name__}.{f.name} must be True or False, got {value!r}")
        if not any(m.get(k) is not None for k in ("gt", "ge", "lt", "le")):
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{type(self).__name__}.{f.name} must be a number {_range_text(m)}, "
                             f"got {value!r}")
        if isinstance(f.default, int) and not isinstance(f.default, bool):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
                object.__setattr__(self, f.name, value)
            if not isinstance(value, int):
                raise ValueError(f"{type(self).__name__}.{f.name} must be an integer "
                                 f"{_range_text(m)}, got {value!r}")
        bad = (not math.isfinite(value)
               or (m["gt"] is not None and not value > m["gt"])
               or (m["ge"] is not None and not value >= m["ge"])
               or (m["lt"] is not None and not value < m["lt"])
               or (m["le"] is not None and not value <= m["le"]))
        if bad:
            raise ValueError(f"{type(self).__name__}.{f.name} = {value!r} is out of range; "
                             f"expected {_range_text(m)}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any] | None) -> C:
        """A config from ``data``; keys that are not fields are ignored with a ConfigWarning."""
        data = dict(data or {})
        names = set(cls.field_names())
        unknown = sorted(k for k in data if k not in names)
        if unknown:
            warnings.warn(f"{cls.__name__}.from_dict ignored unknown keys {unknown}"
                          + _suggest(unknown, names), ConfigWarning, stacklevel=2)
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_kwargs(cls: type[C], owner: str, kwargs: Mapping[str, Any]) -> C:
        """A config from keyword arguments; an unknown keyword is a TypeError (for algorithms)."""
        names = set(cls.field_names())
        unknown = sorted(k for k in kwargs if k not in names)
        if unknown:
            raise TypeError(f"{owner} got unknown config field(s) {unknown}" + _suggest(unknown, names)
                            + f"; the fields are those of {cls.__name__}")
        return cls(**dict(kwargs))

    def merge(self: C, overrides: Mapping[str, Any] | None) -> C:
        """A new config with ``overrides`` applied (validated; unknown keys are a TypeError)."""
        overrides = dict(overrides or {})
        names = set(self.field_names())
        unknown = sorted(k for k in overrides if k not in names)
        if unknown:
            raise TypeError(f"{type(self).__name__}.merge got unknown keys {unknown}"
                            + _suggest(unknown, names))
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (lists copied), suitable for JSON/YAML and checkpoints."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name -> one-line help."""
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


def _accepts(hint: Any, value: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint``: bool, int, float, str, Literal, None, their
    unions, and the outer type of list/tuple/dict; any other annotation accepts anything."""
    if hint is None or hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin is Literal:
        return value in typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts(arm, value) for arm in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if value is None:
        return False
    if hint is bool:
        return isinstance(value, (bool, np.bool_))
    if hint is int:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint in (list, tuple) or origin in (list, tuple):
        return isinstance(value, (list, tuple))
    if hint is dict or origin is dict:
        return isinstance(value, Mapping)
    return True


def _type_text(hint: Any) -> str:
    """'a float (a real number)', 'True, False or None', "a float, 'auto' or None" ... for messages."""
    atoms = _type_atoms(hint)
    return atoms[0] if len(atoms) == 1 else ", ".join(atoms[:-1]) + " or " + atoms[-1]


def _type_atoms(hint: Any) -> list[str]:
    origin = typing.get_origin(hint)
    if origin is Literal:
        return [repr(a) for a in typing.get_args(hint)]
    if origin is typing.Union or origin is types.UnionType:
        return [atom for arm in typing.get_args(hint) for atom in _type_atoms(arm)]
    if hint is type(None):
        return ["None"]
    if hint is bool:
        return ["True", "False"]
    names = {int: "an integer", float: "a float (a real number)", str: "a string", list: "a list",
             tuple: "a list", dict: "a mapping"}
    return [names.get(hint, names.get(origin, getattr(hint, "__name__", str(hint))))]


def _is_number_text(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _suggest(unknown: list[str], names: set[str]) -> str:
    hints = []
    for k in unknown:
        close = difflib.get_close_matches(k, sorted(names), n=1, cutoff=0.6)
        if close:
            hints.append(f"{k!r} -> {close[0]!r}")
    return f" (did you mean {', '.join(hints)}?)" if hints else ""


def _check_hidden(value: Any, owner: str) -> int | list[int]:
    """``hidden``: one int (two layers of that width) or a non-empty list of layer widths."""
    if isinstance(value, bool):
        raise ValueError(f"{owner}.hidden must be an int or a list of ints, got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"{owner}.hidden = {value} is out of range; expected >= 1")
        return value
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in value):
        return list(value)
    raise ValueError(f"{owner}.hidden must be an int >= 1 or a non-empty list of ints >= 1, "
                     f"got {value!r}")


# ====================================================================== on-policy
@dataclass
class _OnPolicyConfig(ConfigBase):
    """Fields every on-policy algorithm shares (rollout, GAE, network, normalisation)."""

    n_envs: int = _f(8, "parallel environments", ge=1)
    n_steps: int = _f(128, "rollout length per env", ge=1)
    learning_rate: float = _f(2.5e-4, "Adam learning rate (the policy's, for TRPO/VPG the critic's)", gt=0)
    anneal_lr: bool = _f(True, "decay the learning rate linearly to 0 over the run")
    gamma: float = _f(0.99, "discount factor", ge=0, le=1)
    gae_lambda: float = _f(0.95, "GAE lambda (1.0: Monte Carlo returns)", ge=0, le=1)
    ent_coef: float = _f(0.01, "entropy bonus coefficient", ge=0)
    vf_coef: float = _f(0.5, "value loss coefficient", ge=0)
    max_grad_norm: float = _f(0.5, "global gradient-norm clip (<= 0: off)")
    normalize_advantages: bool = _f(True, "normalise advantages per minibatch")
    normalize_obs: bool = _f(False, "running mean/std observation normalisation")
    normalize_rewards: bool = _f(False, "scale rewards by the std of the discounted return")
    clip_obs: float = _f(10.0, "clip normalised observations to [-clip_obs, clip_obs]", gt=0)
    clip_reward: float = _f(10.0, "clip normalised rewards to [-clip_reward, clip_reward]", gt=0)
    hidden: Any = _f(64, "hidden layer width (two layers) or a list of widths")
    activation: Literal["tanh", "relu"] = _f("tanh", "hidden activation")
    log_std_init: float = _f(0.0, "initial log std of continuous (Gaussian) policies")
    use_sde: bool = _f(False, "gSDE: state-dependent exploration noise (continuous actions)")
    sde_sample_freq: int = _f(-1, "gSDE: draw new noise every this many steps (-1: once per rollout)", ge=-1)
    ortho_init: bool = _f(True, "orthogonal initialisation (gain sqrt(2), 0.01 policy head, 1 value head)")
    rollout_episodes: int | None = _f(None, "collect this many complete episodes per env per rollout instead "
                                      "of n_steps (r2l's episode-bounded rollouts; batch size varies)",
                                      ge=1, optional=True)
    vec_env: Literal["sync", "async"] = _f("sync", "Python (gymnasium) envs: stepped in this process ('sync') or "
                                           "one subprocess each ('async', gymnasium's AsyncVectorEnv)")
    features_extractor: Literal["auto", "mlp", "nature", "impala"] = _f(
        "auto", "observation encoder: auto (NatureCNN for uint8 images, else the MLP), mlp, nature, impala")
    compiled_collection: bool | None = _f(
        None, "collect rollouts in compiled code (RolloutKernel: forward pass, sampling, env step and GAE "
        "inputs in one nogil loop): None = where it can (CPU device, native env, default Tanh MLP policy, "
        "no gSDE, normalisation, wrappers or rollout_episodes), True = required, False = torch",
        optional=True)

    def validate(self) -> None:
        super().validate()
        if self.compiled_collection is not None and not isinstance(self.compiled_collection, bool):
            raise ValueError(f"{type(self).__name__}.compiled_collection must be True, False or None (None: "
                             f"compiled where it can run), got {self.compiled_collection!r}")


@dataclass
class PPOConfig(_OnPolicyConfig):
    """Proximal Policy Optimization (Schulman et al., 2017); defaults follow CleanRL's ppo.py."""

    algorithm: ClassVar[str] = "ppo"
    n_epochs: int = _f(4, "SGD passes over each rollout", ge=1)
    batch_size: int = _f(256, "minibatch size (above n_envs * n_steps: the whole rollout)", ge=1)
    clip_eps: float = _f(0.2, "PPO clip range", gt=0)
    anneal_clip: bool = _f(False, "decay clip_eps linearly to 0 over the run")
    clip_vloss: bool = _f(True, "clip the value loss around the old values")
    target_kl: float | None = _f(None, "stop the epoch loop once approx_kl exceeds this", gt=0, optional=True)
    compiled_update: bool | None = _f(None, "run the update in compiled code (PPOUpdateKernel): None = where it "
                                      "can (CPU device, default Tanh MLP policy, no gSDE), True = required, "
                                      "False = torch", optional=True)

    def validate(self) -> None:
        super().validate()
        if self.compiled_update is not None and not isinstance(self.compiled_update, bool):
            raise ValueError(f"PPOConfig.compiled_update must be True, False or None (None: compiled where "
                             f"it can run), got {self.compiled_update!r}")



@dataclass
class A2CConfig(_OnPolicyConfig):
    """Advantage Actor-Critic (Mnih et al., 2016); defaults follow SB3's A2C (RMSprop)."""

    algorithm: ClassVar[str] = "a2c"
    n_steps: int = _f(5, "rollout length per env", ge=1)
    learning_rate: float = _f(7e-4, "learning rate", gt=0)
    anneal_lr: bool = _f(False, "decay the learning rate linearly to 0 over the run")
    gae_lambda: float = _f(1.0, "GAE lambda (1.0: Monte Carlo returns)", ge=0, le=1)
    ent_coef: float = _f(0.0, "entropy bonus coefficient", ge=0)
    normalize_advantages: bool = _f(False, "normalise advantages per rollout")
    optimizer: Literal["rmsprop", "adam"] = _f("rmsprop", "optimizer (SB3: RMSprop, alpha 0.99, eps 1e-5)")
    rms_prop_eps: float = _f(1e-5, "RMSprop/Adam epsilon", gt=0)
    compiled_update: bool | None = _f(None, "run the update in compiled code (PPOUpdateKernel, A2C's loss and "
                                      "optimizer): None = where it can (CPU device, default Tanh MLP policy, "
                                      "no gSDE), True = required, False = torch", optional=True)

    def validate(self) -> None:
        super().validate()
        if self.compiled_update is not None and not isinstance(self.compiled_update, bool):
            raise ValueError(f"A2CConfig.compiled_update must be True, False or None (None: compiled where "
                             f"it can run), got {self.compiled_update!r}")


@dataclass
class VPGConfig(_OnPolicyConfig):
    """Vanilla policy gradient (REINFORCE with a learned baseline and GAE; Spinning Up's VPG)."""

    algorithm: ClassVar[str] = "vpg"
    n_envs: int = _f(4, "parallel environments", ge=1)
    n_steps: int = _f(256, "rollout length per env", ge=1)
    learning_rate: float = _f(1e-3, "policy learning rate (one gradient step per rollout)", gt=0)
    anneal_lr: bool = _f(False, "decay the learning rates linearly to 0 over the run")
    gae_lambda: float = _f(0.97, "GAE lambda", ge=0, le=1)
    ent_coef: float = _f(0.0, "entropy bonus coefficient", ge=0)
    vf_learning_rate: float = _f(1e-3, "critic learning rate", gt=0)
    vf_iters: int = _f(20, "critic gradient steps per rollout (full batch)", ge=1)


@dataclass
class TRPOConfig(_OnPolicyConfig):
    """Trust Region Policy Optimization (Schulman et al., 2015); defaults follow SB3-contrib."""

    algorithm: ClassVar[str] = "trpo"
    n_envs: int = _f(8, "parallel environments", ge=1)
    n_steps: int = _f(256, "rollout length per env", ge=1)
    learning_rate: float = _f(1e-3, "critic learning rate (the policy step is set by max_kl)", gt=0)
    anneal_lr: bool = _f(False, "decay the critic learning rate linearly to 0 over the run")
    ent_coef: float = _f(0.0, "entropy bonus coefficient", ge=0)
    max_kl: float = _f(0.01, "trust region: max mean KL(old || new) per update", gt=0)
    kl_reduction: Literal["mean", "sum"] = _f(
        "mean", "how a sample's KL over independent action components enters max_kl: 'mean' (sb3-contrib's, "
        "the zoo's target_kl values assume it) or 'sum' (the joint distribution's KL, as the paper)")
    cg_iters: int = _f(15, "conjugate-gradient iterations", ge=1)
    cg_damping: float = _f(0.1, "damping added to the Fisher-vector product", ge=0)
    line_search_steps: int = _f(10, "backtracking line-search steps", ge=1)
    line_search_shrink: float = _f(0.8, "step shrink factor per line-search step", gt=0, lt=1)
    vf_epochs: int = _f(10, "critic epochs per rollout", ge=1)
    batch_size: int = _f(128, "critic minibatch size", ge=1)


# ====================================================================== off-policy
@dataclass
class _OffPolicyConfig(ConfigBase):
    """Fields every off-policy algorithm shares (replay, schedule, network); the meanings and
    defaults are SB3's, so the same hyperparameters mean the same run."""

    n_envs: int = _f(1, "parallel environments for collection", ge=1)
    buffer_size: int = _f(1_000_000, "replay capacity (transitions)", ge=1)
    learning_starts: int = _f(100, "env steps of uniform random actions before learning starts", ge=0)
    batch_size: int = _f(256, "minibatch size", ge=1)
    learning_rate: float = _f(3e-4, "Adam learning rate", gt=0)
    anneal_lr: bool = _f(False, "decay the learning rate linearly to 0 over the run (the zoo's lin_x rates)")
    gamma: float = _f(0.99, "discount factor", ge=0, le=1)
    tau: float = _f(0.005, "Polyak coefficient of the target networks (1: hard copy)", gt=0, le=1)
    train_freq: int = _f(1, "vector env steps between gradient phases", ge=1)
    gradient_steps: int = _f(1, "gradient steps per phase (-1: as many as env steps collected)", ge=-1)
    hidden: Any = _f(256, "hidden layer width (two layers) or a list of widths")
    features_extractor: Literal["auto", "mlp", "nature", "impala"] = _f(
        "auto", "observation encoder: auto (NatureCNN for uint8 images, else the MLP), mlp, nature, impala")
    steps_per_iteration: int = _f(1000, "env steps per training iteration (how often the logger and "
                                  "on_update run)", ge=1)
    precision: Literal["float32", "bfloat16"] = _f("float32", "dtype of the gradient steps' matrix products: "
                                                   "bfloat16 (autocast) is about 2x faster on CPUs with "
                                                   "AVX512-BF16/AMX; weights, optimizers and targets stay float32")


@dataclass
class SACConfig(_OffPolicyConfig):
    """Soft Actor-Critic (Haarnoja et al., 2018) with automatic entropy tuning; SB3 defaults."""

    algorithm: ClassVar[str] = "sac"
    auto_entropy: bool = _f(True, "tune the temperature alpha towards target_entropy")
    ent_coef: float | str = _f(1.0, "initial (or fixed, if auto_entropy is False) temperature alpha; "
                               "SB3's 'auto' / 'auto_0.1' mean tuned from 1.0 / 0.1", gt=0)
    target_entropy: float | Literal["auto"] | None = _f(None, "entropy target (None or 'auto': -act_dim)",
                                                        optional=True)
    target_update_interval: int = _f(1, "gradient steps between target updates", ge=1)
    use_sde: bool = _f(False, "generalized state-dependent exploration (gSDE, Raffin et al., 2022)")
    sde_sample_freq: int = _f(-1, "gSDE: resample the exploration matrix every this many steps "
                              "(-1: once per collection phase)", ge=-1)
    log_std_init: float = _f(-3.0, "gSDE: initial log std of the exploration matrix")
    share_encoder: bool = _f(True, "image observations: True = one CNN owned by the critics and trained by "
                             "their loss, the actor reading its features detached (SAC-AE / DrQ); False = "
                             "the actor has its own CNN trained by the actor loss (SB3's default)")

    def __post_init__(self) -> None:
        # SB3's spellings: ent_coef="auto" / "auto_0.1" (tuned, starting at 1.0 / 0.1) and
        # target_entropy="auto" (-act_dim) become this config's auto_entropy / ent_coef / None.
        if isinstance(self.ent_coef, str):
            text = self.ent_coef
            if text != "auto" and not (text.startswith("auto_") and _is_number_text(text[5:])):
                raise ValueError(f"SACConfig.ent_coef = {text!r} is not understood; expected a float "
                                 f"> 0, 'auto' or 'auto_<initial value>' such as 'auto_0.1'")
            if not self.auto_entropy:
                raise ValueError(f"SACConfig.ent_coef = {text!r} asks for a tuned temperature but "
                                 f"auto_entropy=False; pass a float ent_coef for a fixed one")
            object.__setattr__(self, "ent_coef", 1.0 if text == "auto" else float(text[5:]))
        if isinstance(self.target_entropy, str) and self.target_entropy == "auto":
            object.__setattr__(self, "target_entropy", None)
        super().__post_init__()


@dataclass
class TD3Config(_OffPolicyConfig):
    """Twin Delayed DDPG (Fujimoto et al., 2018); SB3 defaults (400-300 networks)."""

    algorithm: ClassVar[str] = "td3"
    learning_rate: float = _f(1e-3, "Adam learning rate", gt=0)
    policy_delay: int = _f(2, "critic updates per actor and target update", ge=1)
    target_noise: float = _f(0.2, "std of the target policy smoothing noise (x max action)", ge=0)
    noise_clip: float = _f(0.5, "clip of the target smoothing noise (x max action)", ge=0)
    exploration_noise: float = _f(0.1, "std of the exploration noise (x max action)", ge=0)
    noise_type: Literal["normal", "ornstein-uhlenbeck"] = _f("normal", "exploration noise process")
    hidden: Any = _f([400, 300], "hidden layer width (two layers) or a list of widths")
    share_encoder: bool = _f(True, "image observations: True = one CNN owned by the critics and trained by "
                             "their loss, the actor reading its features detached (SAC-AE / DrQ); False = "
                             "the actor has its own CNN trained by the actor loss (SB3's default)")


@dataclass
class DQNConfig(_OffPolicyConfig):
    """Deep Q-Network (Mnih et al., 2015) with Rainbow extensions; SB3 defaults."""

    algorithm: ClassVar[str] = "dqn"
    learning_rate: float = _f(1e-4, "Adam learning rate", gt=0)
    batch_size: int = _f(32, "minibatch size", ge=1)
    tau: float = _f(1.0, "target update coefficient (1: hard copy)", gt=0, le=1)
    target_update_interval: int = _f(10_000, "env steps between target updates", ge=1)
    train_freq: int = _f(4, "vector env steps between gradient phases", ge=1)
    exploration_fraction: float = _f(0.1, "fraction of the run over which epsilon decays", gt=0, le=1)
    exploration_initial_eps: float = _f(1.0, "initial epsilon", ge=0, le=1)
    exploration_final_eps: float = _f(0.05, "final epsilon", ge=0, le=1)
    max_grad_norm: float = _f(10.0, "gradient-norm clip (<= 0: off)")
    double_dqn: bool = _f(False, "Double DQN targets (van Hasselt et al., 2016)")
    dueling: bool = _f(False, "dueling head V + A - mean A (Wang et al., 2016)")
    n_step: int = _f(1, "n-step returns (Sutton, 1988; Rainbow, Hessel et al., 2018)", ge=1)
    prioritized: bool = _f(False, "prioritized replay (Schaul et al., 2016)")
    alpha: float = _f(0.6, "PER priority exponent", ge=0)
    beta_start: float = _f(0.4, "PER importance-sampling exponent at the start (annealed to 1)", ge=0, le=1)
    prioritized_eps: float = _f(1e-6, "added to |TD error| to form priorities", gt=0)
    hidden: Any = _f(64, "hidden layer width (two layers) or a list of widths")


# ====================================================================== multi-agent
@dataclass
class MAPPOConfig(ConfigBase):
    """Multi-agent PPO (Yu et al., 2022); defaults follow the paper's MPE settings (lr 7e-4,
    10 epochs, 1 minibatch, gamma 0.99, lambda 0.95, clip 0.2, entropy 0.01, grad-norm 10,
    hidden 64, ValueNorm), with fewer parallel envs (32 instead of 128) for CPU budgets."""

    algorithm: ClassVar[str] = "mappo"
    n_agents: int | None = _f(None, "agents passed to the scenario (spread's N; None: its default)", ge=1,
                              optional=True)
    n_envs: int = _f(32, "parallel environments", ge=1)
    n_steps: int = _f(25, "rollout length per env (MPE episodes last max_cycles = 25 steps)", ge=1)
    n_epochs: int = _f(10, "SGD passes over each rollout", ge=1)
    n_minibatches: int = _f(1, "minibatches per epoch", ge=1)
    learning_rate: float = _f(7e-4, "Adam learning rate (actors and critic)", gt=0)
    anneal_lr: bool = _f(False, "decay the learning rate linearly to 0 over the run")
    gamma: float = _f(0.99, "discount factor", ge=0, le=1)
    gae_lambda: float = _f(0.95, "GAE lambda", ge=0, le=1)
    clip_eps: float = _f(0.2, "PPO clip range", gt=0)
    clip_vloss: bool = _f(True, "clip the value loss around the old values")
    ent_coef: float = _f(0.01, "entropy bonus coefficient", ge=0)
    vf_coef: float = _f(1.0, "value loss coefficient", ge=0)
    max_grad_norm: float = _f(10.0, "global gradient-norm clip (<= 0: off)")
    normalize_advantages: bool = _f(True, "normalise advantages per minibatch")
    value_norm: bool = _f(True, "ValueNorm: the critic learns returns normalised by their running mean/std")
    share_policy: bool = _f(True, "one actor for all agents of the same spaces, with a one-hot agent id")
    hidden: Any = _f(64, "hidden layer width (two layers) or a list of widths")
    activation: Literal["tanh", "relu"] = _f("relu", "hidden activation (the paper's ReLU)")
    ortho_init: bool = _f(True, "orthogonal initialisation (gain sqrt(2), 0.01 policy head, 1 value head)")
    log_std_init: float = _f(-0.5, "initial log std of continuous (Gaussian) actors")
    native: bool | None = _f(None, "MPE: True = the native Cython env, False = PettingZoo, None = native "
                             "where the scenario has a kernel", optional=True)
    continuous_actions: bool = _f(False, "MPE: Box(0, 1) actions instead of Discrete")
    max_cycles: int = _f(25, "MPE: steps per episode", ge=1)
    env_kwargs: dict = _f({}, "more scenario arguments (e.g. {'local_ratio': 0.5})")

    def validate(self) -> None:
        super().validate()
        if self.native is not None and not isinstance(self.native, bool):
            raise ValueError(f"{type(self).__name__}.native must be True, False or None, got {self.native!r}")
        if not isinstance(self.env_kwargs, dict):
            raise ValueError(f"{type(self).__name__}.env_kwargs must be a dict, got {self.env_kwargs!r}")


@dataclass
class IPPOConfig(MAPPOConfig):
    """Independent PPO (de Witt et al., 2020): MAPPO's settings, each critic on the agent's own
    observation instead of the global state."""

    algorithm: ClassVar[str] = "ippo"


# ====================================================================== LLM post-training
@dataclass
class _LLMConfig(ConfigBase):
    """Fields GRPO, DPO and OnlineDPO share (optimiser, schedule, forward passes)."""

    learning_rate: float = _f(1e-6, "AdamW learning rate (TRL's default)", gt=0)
    weight_decay: float = _f(0.0, "AdamW weight decay", ge=0)
    adam_beta1: float = _f(0.9, "AdamW beta1", ge=0, lt=1)
    adam_beta2: float = _f(0.999, "AdamW beta2", ge=0, lt=1)
    adam_eps: float = _f(1e-8, "AdamW epsilon", gt=0)
    max_grad_norm: float = _f(1.0, "global gradient-norm clip (<= 0: off)")
    lr_scheduler: Literal["constant", "linear", "cosine"] = _f("constant", "learning-rate schedule over a train() run")
    warmup_steps: int = _f(0, "linear warm-up steps of the schedule", ge=0)
    batch_size: int = _f(8, "train(): prompts (GRPO, OnlineDPO) or pairs (DPO) per micro-batch", ge=1)
    grad_accumulation: int = _f(1, "train(): micro-batches per optimiser step", ge=1)
    shuffle: bool = _f(True, "train(): reshuffle the dataset every epoch (seeded)")
    packing: Literal["auto", "packed", "padded"] = _f(
        "auto", "training forward passes on packed sequences (auto: where the attention isolates them)")
    disable_dropout: bool = _f(True, "set every dropout probability to 0 (TRL's disable_dropout)")
    torch_threads: int | None = _f(None, "torch intra-op threads while training (None: leave torch's setting)",
                                   ge=1, optional=True)


@dataclass
class _SamplingConfig:
    """Generation settings (GRPO, OnlineDPO)."""

    max_new_tokens: int = _f(64, "completion length limit (TRL's max_completion_length)", ge=1)
    temperature: float = _f(1.0, "sampling temperature (log-probs are computed at this temperature too)", gt=0)
    top_p: float = _f(1.0, "nucleus sampling mass", gt=0, le=1)
    top_k: int = _f(0, "sample among the k most likely tokens (0: off)", ge=0)


@dataclass
class GRPOConfig(_LLMConfig, _SamplingConfig):
    """GRPO (Shao et al., 2024, DeepSeekMath) with the DAPO / Dr. GRPO / BNPO variants; TRL's names
    in parentheses."""

    algorithm: ClassVar[str] = "grpo"

    group_size: int = _f(4, "completions sampled per prompt (num_generations)", ge=1)
    kl_coef: float = _f(0.1, "k3 KL penalty to the reference model (beta); 0 skips it", ge=0)
    kl_bias_correction: bool = _f(True, "weight the k3 term by the ratio: unbiased reverse-KL gradient "
                                        "(use_bias_correction_kl); False: DeepSeekMath's original loss")
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = _f(
        "grpo", "token aggregation: per-sequence mean (grpo), batch token mean (bnpo, dapo), "
                "tokens / (B * max_new_tokens) (dr_grpo)")
    epsilon: float = _f(0.2, "lower clip of the probability ratio (1 - epsilon)", gt=0, lt=1)
    epsilon_high: float | None = _f(None, "upper clip 1 + epsilon_high (DAPO's clip-higher; None: epsilon)",
                                    gt=0, optional=True)
    num_iterations: int = _f(1, "updates per generation batch (mu)", ge=1)
    scale_rewards: Literal["group", "batch", "none"] = _f("group", "advantage scale: group std, batch std or none")
    advantage_eps: float = _f(1e-4, "added to the std in the advantage scale", ge=0)
    reward_weights: Any = _f(None, "one weight per reward function (None: all 1)", optional=True)
    mask_truncated_completions: bool = _f(False, "exclude completions cut at max_new_tokens from the loss (DAPO)")

    def validate(self) -> None:
        if self.scale_rewards == "group" and self.group_size < 2:
            raise ValueError(f"GRPOConfig.group_size = {self.group_size} with scale_rewards='group': a group "
                             f"of one has no standard deviation (its advantage is always 0); use "
                             f"group_size >= 2")
        if self.reward_weights is not None:
            w = self.reward_weights
            if not isinstance(w, (list, tuple)) or not w or not all(
                    isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in w):
                raise ValueError(f"GRPOConfig.reward_weights must be a non-empty list of finite numbers, got {w!r}")
            object.__setattr__(self, "reward_weights", [float(x) for x in w])


@dataclass
class DPOConfig(_LLMConfig):
    """DPO (Rafailov et al., 2023) and its loss variants; TRL's names."""

    algorithm: ClassVar[str] = "dpo"

    beta: float = _f(0.1, "temperature of the implicit reward beta * log(pi / pi_ref)", gt=0)
    loss_type: Literal["sigmoid", "robust", "hinge", "ipo", "sppo_hard", "nca_pair", "apo_zero", "apo_down"] = _f(
        "sigmoid", "preference loss (TRL's loss_type)")
    label_smoothing: float = _f(0.0, "conservative DPO / robust DPO label noise", ge=0, lt=0.5)


@dataclass
class OnlineDPOConfig(DPOConfig, _SamplingConfig):
    """Online DPO (Guo et al., 2024): two sampled completions per prompt, ranked by a reward or judge."""

    algorithm: ClassVar[str] = "online_dpo"

    missing_eos_penalty: float | None = _f(None, "subtracted from the reward of completions without EOS",
                                           ge=0, optional=True)




# ====================================================================== world models
@dataclass
class DreamerV3Config(ConfigBase):
    """DreamerV3 (Hafner et al., 2023, arXiv:2301.04104); defaults are the paper's (Table W.1),
    with the XS model preset so a run fits a CPU."""

    algorithm: ClassVar[str] = "dreamer"
    size: Literal["XS", "S", "M", "L", "XL"] = _f("XS", "model size preset (rlox.algorithms.dreamer_v3.MODEL_SIZES)")
    deter: int | None = _f(None, "GRU state width (None: from size)", ge=1, optional=True)
    hidden: int | None = _f(None, "MLP width (None: from size)", ge=1, optional=True)
    layers: int | None = _f(None, "MLP layers of encoder/decoder/heads (None: from size)", ge=1, optional=True)
    groups: int | None = _f(None, "categorical latents (None: from size)", ge=1, optional=True)
    classes: int | None = _f(None, "classes per latent (None: from size)", ge=2, optional=True)
    cnn_depth: int | None = _f(None, "channels of the first conv layer for images (None: from size)", ge=1,
                               optional=True)
    n_envs: int = _f(1, "parallel environments", ge=1)
    buffer_size: int = _f(1_000_000, "replay capacity (step records, all envs)", ge=1)
    batch_size: int = _f(16, "sequences per update", ge=1)
    batch_length: int = _f(64, "steps per replayed sequence", ge=2)
    train_ratio: float = _f(512.0, "replayed steps per env step (updates = n_envs * train_ratio / "
                            "(batch_size * batch_length) per env step)", gt=0)
    learning_starts: int = _f(1024, "env steps of uniform random actions before learning starts", ge=0)
    steps_per_iteration: int = _f(1000, "env steps per training iteration (how often loggers run)", ge=1)
    imagination_horizon: int = _f(15, "imagined steps per start state", ge=1)
    gamma: float = _f(0.997, "discount (1 - 1/333)", ge=0, le=1)
    return_lambda: float = _f(0.95, "lambda of the imagined TD(lambda) returns", ge=0, le=1)
    model_lr: float = _f(1e-4, "world model Adam learning rate", gt=0)
    actor_lr: float = _f(3e-5, "actor Adam learning rate", gt=0)
    critic_lr: float = _f(3e-5, "critic Adam learning rate", gt=0)
    model_grad_clip: float = _f(1000.0, "world model gradient-norm clip", gt=0)
    ac_grad_clip: float = _f(100.0, "actor and critic gradient-norm clip", gt=0)
    free_bits: float = _f(1.0, "free nats of the KL losses (clipped below this)", ge=0)
    dyn_scale: float = _f(0.5, "weight of the dynamics KL loss", ge=0)
    rep_scale: float = _f(0.1, "weight of the representation KL loss", ge=0)
    unimix: float = _f(0.01, "uniform mix of the latent and discrete-action categoricals", ge=0, lt=1)
    n_bins: int = _f(255, "two-hot bins (symlog space, [-20, 20]) of the reward and critic heads", ge=2)
    entropy_coef: float = _f(3e-4, "actor entropy bonus (eta)", ge=0)
    return_norm_decay: float = _f(0.99, "EMA decay of the returns' 5-95 percentile range", ge=0, lt=1)
    critic_ema_decay: float = _f(0.98, "EMA decay of the slow critic", ge=0, lt=1)
    slow_reg: float = _f(1.0, "weight of the critic's regulariser towards the slow critic", ge=0)
    actor_grad: Literal["auto", "reinforce", "backprop"] = _f(
        "auto", "actor gradient: REINFORCE, backprop through the model, or auto (backprop for continuous "
        "actions, REINFORCE for discrete: DreamerV3's first release)")
    precision: Literal["auto", "float32", "bfloat16"] = _f("auto", "auto: bfloat16 autocast on CUDA GPUs "
                                                           "that support it for models with a GRU of 2048 "
                                                           "units or more (L, XL), float32 elsewhere")
    save_replay: bool = _f(True, "save the replay (filled part) in checkpoints, so resumed runs keep it")

    def validate(self) -> None:
        if self.hidden is not None and not isinstance(self.hidden, int):
            raise ValueError(f"DreamerV3Config.hidden must be one int (the MLP width) or None, got {self.hidden!r}")
        if self.batch_length > self.buffer_size // self.n_envs:
            raise ValueError(f"DreamerV3Config.batch_length = {self.batch_length} is larger than buffer_size = "
                             f"{self.buffer_size} / n_envs = {self.n_envs}; sequences must fit in each env's replay")




def config_for(algorithm: str) -> type[ConfigBase]:
    """The config class of an algorithm name ("ppo", "sac", ...): a built-in's from ``CONFIGS``,
    else the registered algorithm's ``config_class`` (``hybrid_ppo``, a plugin's algorithm)."""
    key = algorithm.lower()
    if key in CONFIGS:
        return CONFIGS[key]
    from rlox.plugins import ALGORITHM_REGISTRY

    cfg = getattr(ALGORITHM_REGISTRY.get(key), "config_class", None) if key in ALGORITHM_REGISTRY else None
    if cfg is None:
        raise KeyError(f"no config for {algorithm!r}; known: {', '.join(sorted(CONFIGS))} (and the "
                       f"config_class of registered algorithms)")
    return cfg


# ====================================================================== offline RL (datasets, no env steps)
@dataclass
class _OfflineConfig(ConfigBase):
    """Fields every offline algorithm shares (TD3+BC, IQL, CQL, BC): one gradient step is one
    minibatch drawn uniformly from the dataset; defaults are the papers' MuJoCo settings."""

    batch_size: int = _f(256, "minibatch size", ge=1)
    learning_rate: float = _f(3e-4, "Adam learning rate of every network", gt=0)
    gamma: float = _f(0.99, "discount factor", ge=0, le=1)
    tau: float = _f(0.005, "Polyak coefficient of the target networks (1: hard copy)", gt=0, le=1)
    hidden: Any = _f(256, "hidden layer width (two layers) or a list of widths")
    normalize_obs: bool = _f(False, "standardise observations with the dataset's mean and std (saved "
                             "with the model, applied in predict and evaluation)")
    steps_per_iteration: int = _f(1000, "gradient steps per training iteration (how often the logger, "
                                  "on_update and evaluation run)", ge=1)


@dataclass
class TD3BCConfig(_OfflineConfig):
    """TD3+BC (Fujimoto & Gu, 2021): TD3 whose actor loss adds a behaviour-cloning term."""

    algorithm: ClassVar[str] = "td3_bc"
    alpha: float = _f(2.5, "weight of the Q term: lambda = alpha / mean|Q| (sec. 4)", gt=0)
    policy_delay: int = _f(2, "critic updates per actor and target update", ge=1)
    target_noise: float = _f(0.2, "std of the target policy smoothing noise (normalised actions)", ge=0)
    noise_clip: float = _f(0.5, "clip of the target smoothing noise (normalised actions)", ge=0)
    normalize_obs: bool = _f(True, "standardise observations with the dataset's statistics (sec. 4)")


@dataclass
class IQLConfig(_OfflineConfig):
    """Implicit Q-Learning (Kostrikov, Nair & Levine, 2021)."""

    algorithm: ClassVar[str] = "iql"
    expectile: float = _f(0.7, "expectile tau of the value loss (0.5: mean; -> 1: max over in-data actions)",
                          gt=0, lt=1)
    temperature: float = _f(3.0, "inverse temperature beta of the advantage weights exp(beta * A)", ge=0)
    max_weight: float = _f(100.0, "clip of the advantage weights exp(beta * A)", gt=0)
    normalize_obs: bool = _f(True, "standardise observations with the dataset's statistics")


@dataclass
class CQLConfig(_OfflineConfig):
    """Conservative Q-Learning (Kumar et al., 2020): CQL(H) on SAC, or on a Q-network for
    discrete actions."""

    algorithm: ClassVar[str] = "cql"
    cql_alpha: float = _f(5.0, "weight of the conservative penalty (alpha in eq. 4)", ge=0)
    n_action_samples: int = _f(10, "random and policy actions per state in the log-sum-exp", ge=1)
    cql_temperature: float = _f(1.0, "temperature of the log-sum-exp", gt=0)
    target_action_gap: float | None = _f(None, "Lagrangian CQL: tune cql_alpha so the penalty stays near "
                                         "this gap (tau in eq. 5; None: fixed cql_alpha)", gt=0, optional=True)
    actor_learning_rate: float = _f(1e-4, "Adam learning rate of the actor (the paper's 1e-4)", gt=0)
    backup: Literal["soft", "mean"] = _f("soft", "the critics' target: 'soft' = SAC's, at a sampled action "
                                         "with the entropy term; 'mean' = the target critics at the actor's mean "
                                         "action, no entropy term (d3rlpy's default)")
    auto_entropy: bool = _f(True, "tune SAC's temperature towards -act_dim")
    ent_coef: float = _f(1.0, "initial (or fixed) SAC temperature", gt=0)


@dataclass
class BCConfig(_OfflineConfig):
    """Behavioural cloning: supervised learning of the dataset's actions."""

    algorithm: ClassVar[str] = "bc"
    policy: Literal["deterministic", "gaussian"] = _f("deterministic", "continuous actions: MSE on a tanh "
                                                      "actor, or the log-likelihood of a Gaussian one")
    learning_rate: float = _f(1e-3, "Adam learning rate", gt=0)





# ====================================================================== distributed
@dataclass
class IMPALAConfig(ConfigBase):
    """IMPALA with V-trace (Espeholt et al., 2018): actors collect, one learner corrects and learns.

    Sizes: each of ``n_actors`` actors steps ``envs_per_actor`` envs and sends trajectories of
    ``unroll_length`` steps; a learner batch holds ``batch_size`` env steps, i.e.
    ``batch_size // (unroll_length * envs_per_actor)`` actor trajectories.
    """

    algorithm: ClassVar[str] = "impala"
    n_actors: int = _f(8, "actors, each with its own envs and its own copy of the policy", ge=1)
    envs_per_actor: int = _f(4, "envs each actor steps together (one vector env per actor)", ge=1)
    unroll_length: int = _f(32, "steps per trajectory an actor sends (T)", ge=1)
    # 256 steps (2 trajectories of 32 x 4): IMPALA makes one gradient step per batch, so the batch
    # sets the number of updates, and on CartPole the critic needs >1000 Adam steps just to reach
    # its ~100-high values. At 2048 a 1M-step run made 488 updates (value loss ~75 at the end; 5
    # seeds: IQM 408); at 512, 1953 (IQM 452-500 over two 5-seed runs); at 256, 3906 (IQM 477, 500
    # and 500 over three 5-seed runs, benchmarks/results/impala.md). For scale: the paper's Atari
    # batch is 32 x 20 = 640 steps (Espeholt et al. 2018, appendix), RLlib's CartPole example 500
    # (rllib/tuned_examples/impala/cartpole_impala.py), SB3 zoo's A2C on CartPole 8 x 5 = 40.
    batch_size: int = _f(256, "env steps per learner update; a multiple of unroll_length * envs_per_actor", ge=1)
    learning_rate: float = _f(1e-3, "learning rate", gt=0)
    anneal_lr: bool = _f(True, "decay the learning rate linearly to 0 over the run")
    optimizer: Literal["adam", "rmsprop"] = _f("adam", "optimizer (the paper: RMSProp, alpha 0.99)")
    optimizer_eps: float = _f(1e-5, "Adam/RMSProp epsilon", gt=0)
    gamma: float = _f(0.99, "discount factor", ge=0, le=1)
    rho_bar: float = _f(1.0, "V-trace truncation of the importance weights in the targets and pg", gt=0)
    c_bar: float = _f(1.0, "V-trace truncation of the trace coefficients c_t", gt=0)
    vf_coef: float = _f(0.5, "baseline (value) loss coefficient", ge=0)
    ent_coef: float = _f(0.01, "entropy bonus coefficient", ge=0)
    max_grad_norm: float = _f(40.0, "global gradient-norm clip (the paper: 40; <= 0: off)")
    hidden: Any = _f(64, "hidden layer width (two layers) or a list of widths")
    activation: Literal["tanh", "relu"] = _f("tanh", "hidden activation")
    ortho_init: bool = _f(True, "orthogonal initialisation (gain sqrt(2), 0.01 policy head, 1 value head)")
    log_std_init: float = _f(0.0, "initial log std of continuous (Gaussian) policies")
    backend: Literal["local", "thread", "ray"] = _f("local", "where actors run: 'local' (processes on this "
                                                    "machine), 'thread' (in the learner's thread), 'ray'")
    n_workers: int | None = _f(None, "local backend: actor processes (None: min(n_actors, CPU cores)); "
                               "actors are shared out over them", ge=1, optional=True)
    ray_address: str | None = _f(None, "ray backend: cluster to join ('auto', 'host:port'; None: start a "
                                 "local Ray instance)", optional=True)
    ray_actor_cpus: float | None = _f(None, "ray backend: CPUs reserved per actor (None: the cluster's "
                                      "CPUs / n_actors, at most 1)", gt=0, optional=True)
    actor_timeout: float = _f(60.0, "wall seconds an actor may go without delivering a trajectory (counted "
                              "from its last delivery or hand-out of work) before it is restarted", gt=0)
    max_actor_restarts: int = _f(20, "actor restarts allowed per train() call before giving up", ge=0)

    def validate(self) -> None:
        super().validate()
        per = self.unroll_length * self.envs_per_actor
        if self.batch_size % per != 0:
            lo = max(per, self.batch_size // per * per)
            raise ValueError(f"IMPALAConfig.batch_size = {self.batch_size} is not a multiple of unroll_length * "
                             f"envs_per_actor = {self.unroll_length} * {self.envs_per_actor} = {per}; a batch "
                             f"is made of whole trajectories: use batch_size={lo} or {lo + per}")
        if self.ray_address is not None and not (isinstance(self.ray_address, str) and self.ray_address):
            raise ValueError(f"IMPALAConfig.ray_address must be None, 'auto' or 'host:port', got "
                             f"{self.ray_address!r}")


# ====================================================================== recurrent on-policy
@dataclass
class RecurrentPPOConfig(_OnPolicyConfig):
    """PPO with LSTM actor and critic (RecurrentPPO); defaults follow sb3-contrib's RecurrentPPO
    (``MlpLstmPolicy``: one 256-unit LSTM each for actor and critic, [64, 64] Tanh heads)."""

    algorithm: ClassVar[str] = "recurrent_ppo"
    learning_rate: float = _f(3e-4, "Adam learning rate", gt=0)
    anneal_lr: bool = _f(False, "decay the learning rate linearly to 0 over the run")
    ent_coef: float = _f(0.0, "entropy bonus coefficient", ge=0)
    vf_coef: float = _f(1.0, "value loss coefficient (rlox's value loss is half the MSE: 1.0 = sb3-contrib's 0.5)",
                        ge=0)
    n_epochs: int = _f(10, "SGD passes over each rollout", ge=1)
    batch_size: int = _f(128, "env steps per minibatch (cut into sequences at episode starts)", ge=1)
    clip_eps: float = _f(0.2, "PPO clip range", gt=0)
    anneal_clip: bool = _f(False, "decay clip_eps linearly to 0 over the run")
    clip_vloss: bool = _f(False, "clip the value loss around the old values (sb3-contrib: off)")
    target_kl: float | None = _f(None, "stop the epoch loop once approx_kl exceeds 1.5x this", gt=0, optional=True)
    lstm_hidden_size: int = _f(256, "LSTM hidden units (actor and critic each)", ge=1)
    n_lstm_layers: int = _f(1, "stacked LSTM layers", ge=1)
    enable_critic_lstm: bool = _f(True, "the critic has an LSTM of its own")
    shared_lstm: bool = _f(False, "the critic reads the actor's LSTM output (detached; only the actor trains it)")

    def validate(self) -> None:
        super().validate()
        if self.shared_lstm and self.enable_critic_lstm:
            raise ValueError("RecurrentPPOConfig: shared_lstm=True and enable_critic_lstm=True ask for both a "
                             "shared and a separate critic LSTM; set enable_critic_lstm=False to share the "
                             "actor's LSTM")




def _algorithm_configs() -> dict[str, type[ConfigBase]]:
    """Every config dataclass of this module that names its algorithm (``algorithm = "ppo"``)."""
    found, todo = {}, [ConfigBase]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__ == __name__ and cls.__dict__.get("algorithm"):
            found[cls.algorithm] = cls
    return dict(sorted(found.items()))


#: Algorithm name -> config class of the built-ins (a config is found by its ``algorithm`` name,
#: so adding one here is defining the dataclass).
CONFIGS: dict[str, type[ConfigBase]] = _algorithm_configs()
__all__ += [c.__name__ for c in CONFIGS.values() if c.__name__ not in __all__]


def __getattr__(name: str) -> Any:
    # TrainingConfig (one experiment) lives next to the runner that trains it; re-exported here.
    if name == "TrainingConfig":
        from rlox.runner import TrainingConfig

        return TrainingConfig
    raise AttributeError(f"module 'rlox.config' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"TrainingConfig"})
