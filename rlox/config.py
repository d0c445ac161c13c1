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
import typing
import warnings
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, TypeVar

from rlox.errors import RloxWarning

__all__ = [
    "ConfigBase", "ConfigWarning", "PPOConfig", "A2CConfig", "VPGConfig", "TRPOConfig",
    "SACConfig", "TD3Config", "DQNConfig", "CONFIGS", "config_for",
    "GRPOConfig", "DPOConfig", "OnlineDPOConfig",
]

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
            if m.get("optional"):
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
    ent_coef: float = _f(1.0, "initial (or fixed, if auto_entropy is False) temperature alpha", gt=0)
    target_entropy: float | None = _f(None, "entropy target (None: -act_dim)", optional=True)
    target_update_interval: int = _f(1, "gradient steps between target updates", ge=1)
    use_sde: bool = _f(False, "generalized state-dependent exploration (gSDE, Raffin et al., 2022)")
    sde_sample_freq: int = _f(-1, "gSDE: resample the exploration matrix every this many steps "
                              "(-1: once per collection phase)", ge=-1)
    log_std_init: float = _f(-3.0, "gSDE: initial log std of the exploration matrix")


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


CONFIGS: dict[str, type[ConfigBase]] = {
    c.algorithm: c for c in (PPOConfig, A2CConfig, VPGConfig, TRPOConfig, SACConfig, TD3Config, DQNConfig,
                          GRPOConfig, DPOConfig, OnlineDPOConfig)
}


def config_for(algorithm: str) -> type[ConfigBase]:
    """The config class of a built-in algorithm name ("ppo", "sac", ...)."""
    try:
        return CONFIGS[algorithm.lower()]
    except KeyError:
        raise KeyError(f"no built-in config for {algorithm!r}; known: {', '.join(sorted(CONFIGS))}") from None


# ====================================================================== experiments
#: What ``TrainingConfig.logger`` / ``callbacks`` / ``wrappers`` entries may look like.
_ENTRY_HELP = ("a name ('console'), a mapping with 'type' ({'type': 'tensorboard', 'log_dir': 'runs/x'}) "
               "or a one-key mapping ({'tensorboard': {'log_dir': 'runs/x'}})")


@dataclass
class TrainingConfig:
    """One training run, as an experiment file describes it (``rlox.runner.train_from_config``).

        cfg = TrainingConfig(algorithm="ppo", env="CartPole-v1", total_timesteps=100_000, seed=42,
                             config={"n_envs": 16, "learning_rate": 3e-4})

    Loggers, callbacks and wrappers are given by name (``rlox.runner.LOGGERS``, ``CALLBACKS``,
    ``WRAPPERS``), as a string or a mapping with ``type`` and the constructor's arguments.
    ``from_dict`` rejects unknown top-level keys, listing the allowed ones.
    """

    algorithm: str = _f("ppo", "registered algorithm name (ppo, a2c, ...)")
    env: Any = _f("CartPole-v1", "env id (gymnasium id or rlox.plugins.ENV_REGISTRY name)")
    total_timesteps: int = _f(100_000, "env steps to train (all envs together)", ge=1)
    seed: int = _f(0, "seed of envs, networks and sampling")
    config: dict = _f({}, "algorithm config fields, merged over the preset")
    logger: Any = _f(None, "logger(s): " + _ENTRY_HELP + ", or a list of them", optional=True)
    callbacks: list = _f([], "callbacks, each " + _ENTRY_HELP)
    wrappers: list = _f([], "vector-env wrappers, each " + _ENTRY_HELP + " (e.g. vec_normalize)")
    preset: bool = _f(True, "merge the tuned preset for (algorithm, env) under config")
    device: str = _f("cpu", "torch device")
    artifacts_dir: str | None = _f(None, "write training artifacts (best actor, inference.yaml, CSVs) here",
                                   optional=True)
    eval_freq: int | None = _f(None, "env steps between the artifacts' evaluations (None: 20 per run)",
                               ge=1, optional=True)
    eval_episodes: int = _f(5, "episodes per artifacts evaluation", ge=1)
    save_path: str | None = _f(None, "save the final checkpoint here", optional=True)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            ConfigBase._check_field(self, f, hints.get(f.name))  # the shared type/range checks
        self.validate()

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (what an experiment file holds)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def validate(self) -> None:
        if not isinstance(self.algorithm, str) or not self.algorithm:
            raise ValueError(f"TrainingConfig.algorithm must be a non-empty string such as 'ppo', got "
                             f"{self.algorithm!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"TrainingConfig.seed must be an integer, got {self.seed!r}")
        if not isinstance(self.config, dict):
            raise ValueError(f"TrainingConfig.config must be a mapping of algorithm config fields, got "
                             f"{type(self.config).__name__}")
        for name in ("callbacks", "wrappers"):
            value = getattr(self, name)
            if not isinstance(value, list):
                raise ValueError(f"TrainingConfig.{name} must be a list, each entry {_ENTRY_HELP}; got "
                                 f"{type(value).__name__}")
            for i, entry in enumerate(value):
                _check_entry(f"TrainingConfig.{name}[{i}]", entry)
        loggers = self.logger if isinstance(self.logger, list) else [] if self.logger is None else [self.logger]
        for i, entry in enumerate(loggers):
            _check_entry("TrainingConfig.logger" + (f"[{i}]" if isinstance(self.logger, list) else ""), entry)
        for name in ("artifacts_dir", "save_path"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"TrainingConfig.{name} must be a path string, got {value!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, source: str | None = None) -> "TrainingConfig":
        """A config from an experiment mapping (e.g. a YAML file's contents).

        Numbers written as strings (``"3e-4"``, ``"100_000"``) become numbers in the top-level
        numeric fields and in ``config``. Unknown top-level keys are a ValueError that lists the
        allowed keys; ``source`` (a file name) prefixes the messages.
        """
        where = source or cls.__name__
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must hold a mapping of experiment settings, got {type(data).__name__}")
        names = cls.field_names()
        unknown = sorted(str(k) for k in data if k not in names)
        if unknown:
            raise ValueError(f"{where} has unknown top-level keys {unknown}" + _suggest(unknown, set(names))
                             + f"; allowed: {names}")
        values = dict(data)
        for key in ("total_timesteps", "seed", "eval_freq", "eval_episodes"):
            if key in values:
                values[key] = _number(values[key])
        cfg = values.get("config")
        if cfg is None:
            values.pop("config", None)
        elif isinstance(cfg, Mapping):
            values["config"] = {str(k): _number(v) for k, v in cfg.items()}
        for key in ("callbacks", "wrappers"):
            if values.get(key) is None:
                values.pop(key, None)
        try:
            return cls(**values)
        except ValueError as exc:
            if source:
                raise ValueError(f"{source}: {exc}") from None
            raise


def _check_entry(where: str, entry: Any) -> None:
    if isinstance(entry, str) and entry:
        return
    if isinstance(entry, Mapping):
        if "type" in entry and isinstance(entry["type"], str):
            return
        if len(entry) == 1:
            (_, kwargs), = entry.items()
            if kwargs is None or isinstance(kwargs, Mapping):
                return
    raise ValueError(f"{where} = {entry!r} is not understood; expected {_ENTRY_HELP}")


def _number(value: Any) -> Any:
    """``"3e-4"`` -> 0.0003, ``"100_000"`` -> 100000; anything else unchanged."""
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        for conv in (int, float):
            try:
                return conv(text)
            except ValueError:
                pass
    return value


__all__ += ["TrainingConfig"]
