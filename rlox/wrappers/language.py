"""Language-grounded and goal-conditioned observations for gymnasium envs.

    from rlox.wrappers.language import LanguageWrapper, GoalConditionedWrapper

    env = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda obs: "balance the pole")
    obs, info = env.reset()          # {"observation": array(4), "instruction": "balance the pole"}

    env = LanguageWrapper(env0, instruction_fn=fn, tokenizer=tok, max_length=16)
    obs, info = env.reset()          # {"observation": ..., "instruction": int64[16], "attention_mask": int64[16]}

    env = GoalConditionedWrapper(gym.make("CartPole-v1"), goal_fn=sample_goal, reward_fn=goal_reward)
    obs, info = env.reset()          # {"observation", "achieved_goal", "desired_goal"}
    env.compute_reward(achieved[B, g], desired[B, g], info)   # rewards [B]

``GoalConditionedWrapper`` follows gymnasium(-robotics)'s goal-env convention, so it works with
``rlox.her.HerReplayBuffer`` and any code written for ``GoalEnv``.
"""
from __future__ import annotations

import inspect
import string
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["LanguageWrapper", "GoalConditionedWrapper"]

#: Characters an untokenised instruction may hold (gymnasium's Text space checks them).
TEXT_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "


class LanguageWrapper(gym.Wrapper):
    """Adds an instruction to every observation: ``Dict(observation=..., instruction=...)``.

    Args:
        env: the env to wrap.
        instruction_fn: ``fn(obs) -> str``, called on the first observation of each episode (and on
            every observation with ``per_step=True``).
        tokenizer: optional ``transformers`` tokenizer (anything called as
            ``tokenizer(text, padding="max_length", truncation=True, max_length=L)`` returning
            ``input_ids`` and ``attention_mask``); the instruction then becomes ``int64[max_length]``
            token ids (``Box(0, vocab_size - 1)``) and ``attention_mask`` is added, so a policy can
            consume it. Without one the instruction is a ``Text`` space value.
        max_length: token length (with a tokenizer) or the longest instruction (without).
        per_step: recompute the instruction on every step (default: once per episode).
    """

    def __init__(self, env: gym.Env, instruction_fn: Callable[[Any], str], *, tokenizer: Any = None,
                 max_length: int | None = None, per_step: bool = False) -> None:
        super().__init__(env)
        if not callable(instruction_fn):
            raise TypeError(f"instruction_fn must be callable (obs -> str), got {type(instruction_fn).__name__}")
        if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                       or max_length < 1):
            raise ValueError(f"max_length must be an int >= 1, got {max_length!r}")
        self.instruction_fn = instruction_fn
        self.tokenizer = tokenizer
        self.per_step = bool(per_step)
        self.instruction: str | None = None
        if tokenizer is None:
            self.max_length = max_length or 256
            text_space = spaces.Text(max_length=self.max_length, charset=TEXT_CHARSET)
            self.observation_space = spaces.Dict({"observation": env.observation_space, "instruction": text_space})
        else:
            if not callable(tokenizer):
                raise TypeError(f"tokenizer must be callable like a transformers tokenizer, got "
                                f"{type(tokenizer).__name__}")
            vocab = getattr(tokenizer, "vocab_size", None)
            if vocab is None and callable(getattr(tokenizer, "__len__", None)):
                vocab = len(tokenizer)
            if not isinstance(vocab, int) or vocab < 1:
                raise TypeError("tokenizer must expose its vocabulary size (vocab_size or len(tokenizer))")
            self.vocab_size = max(int(vocab), len(tokenizer) if hasattr(tokenizer, "__len__") else 0)
            self.max_length = max_length or 32
            ids = spaces.Box(0, self.vocab_size - 1, (self.max_length,), np.int64)
            mask = spaces.Box(0, 1, (self.max_length,), np.int64)
            self.observation_space = spaces.Dict({"observation": env.observation_space, "instruction": ids,
                                                  "attention_mask": mask})

    def _instruction(self, obs: Any) -> str:
        text = self.instruction_fn(obs)
        if not isinstance(text, str):
            raise TypeError(f"instruction_fn must return a str, returned {type(text).__name__} {text!r}")
        return text

    def _observe(self, obs: Any) -> dict[str, Any]:
        text = self.instruction
        if self.tokenizer is None:
            if len(text) > self.max_length:
                raise ValueError(f"instruction of {len(text)} characters is longer than max_length="
                                 f"{self.max_length}; raise max_length or shorten it: {text[:40]!r}...")
            bad = sorted(set(text) - set(TEXT_CHARSET))
            if bad:
                raise ValueError(f"instruction {text!r} holds characters {bad} outside the Text space's charset "
                                 f"(printable ASCII); tokenise it (tokenizer=...) or remove them")
            return {"observation": obs, "instruction": text}
        enc = self.tokenizer(text, padding="max_length", truncation=True, max_length=self.max_length)
        ids = np.asarray(enc["input_ids"], dtype=np.int64).reshape(-1)
        mask = np.asarray(enc.get("attention_mask", np.ones_like(ids)), dtype=np.int64).reshape(-1)
        if ids.shape != (self.max_length,):
            raise ValueError(f"the tokenizer returned {ids.shape[0]} ids, expected {self.max_length}; it must "
                             f"pad and truncate (a transformers tokenizer needs a pad token)")
        return {"observation": obs, "instruction": ids, "attention_mask": mask}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.instruction = self._instruction(obs)
        info = dict(info, instruction=self.instruction)
        return self._observe(obs), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.per_step:
            self.instruction = self._instruction(obs)
        return self._observe(obs), reward, terminated, truncated, dict(info, instruction=self.instruction)


def _n_params(fn: Callable) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 3
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


class GoalConditionedWrapper(gym.Wrapper):
    """Gymnasium's goal-env convention on any env: ``Dict(observation, achieved_goal, desired_goal)``.

    Args:
        env: the env to wrap.
        goal_fn: ``fn() -> goal`` (or ``fn(obs)``), the desired goal of an episode, drawn at reset.
        reward_fn: ``fn(achieved, desired)`` (or ``fn(achieved, desired, info)``) -> reward. If it maps
            batches ``[B, *goal]`` to ``[B]`` rewards it is called once per batch by
            ``compute_reward``; a function of one pair is applied row by row.
        achieved_goal_fn: ``fn(obs) -> achieved goal`` (default: the observation itself).
        success_fn: optional ``fn(achieved, desired) -> bool``, reported as ``info["is_success"]``.
        terminate_on_success: end the episode when ``success_fn`` says so.
        goal_space: the goals' space (default: an unbounded Box of the first goal's shape).
    """

    def __init__(self, env: gym.Env, goal_fn: Callable[..., Any], reward_fn: Callable[..., Any], *,
                 achieved_goal_fn: Callable[[Any], Any] | None = None,
                 success_fn: Callable[[Any, Any], bool] | None = None, terminate_on_success: bool = False,
                 goal_space: spaces.Space | None = None) -> None:
        super().__init__(env)
        for name, fn in (("goal_fn", goal_fn), ("reward_fn", reward_fn)):
            if not callable(fn):
                raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
        if terminate_on_success and success_fn is None:
            raise ValueError("terminate_on_success=True needs success_fn=(achieved, desired) -> bool")
        self.goal_fn = goal_fn
        self.reward_fn = reward_fn
        self.achieved_goal_fn = achieved_goal_fn or (lambda obs: obs)
        self.success_fn = success_fn
        self.terminate_on_success = bool(terminate_on_success)
        self._goal_fn_takes_obs = _n_params(goal_fn) >= 1
        self._reward_takes_info = _n_params(reward_fn) >= 3
        if goal_space is None:
            sample = np.asarray(self._draw_goal(env.observation_space.sample()))
            dtype = sample.dtype if sample.dtype.kind == "f" else np.float32
            goal_space = spaces.Box(-np.inf, np.inf, sample.shape, dtype)
        self.goal_space = goal_space
        self.observation_space = spaces.Dict({"observation": env.observation_space, "achieved_goal": goal_space,
                                              "desired_goal": goal_space})
        self.desired_goal: np.ndarray | None = None

    def _draw_goal(self, obs: Any) -> Any:
        return self.goal_fn(obs) if self._goal_fn_takes_obs else self.goal_fn()

    def _observe(self, obs: Any) -> dict[str, Any]:
        dtype = getattr(self.goal_space, "dtype", None)
        achieved = np.asarray(self.achieved_goal_fn(obs), dtype=dtype)
        return {"observation": obs, "achieved_goal": achieved, "desired_goal": self.desired_goal.copy()}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> np.ndarray | float:
        """Rewards of ``achieved_goal`` vs ``desired_goal``: one pair ``[*goal]`` -> a float, a batch
        ``[B, *goal]`` -> ``float32[B]`` (what hindsight relabelling calls)."""
        achieved, desired = np.asarray(achieved_goal), np.asarray(desired_goal)
        if achieved.shape != desired.shape:
            raise ValueError(f"achieved_goal has shape {achieved.shape}, desired_goal {desired.shape}; they must match")
        goal_ndim = len(self.goal_space.shape) if self.goal_space.shape is not None else achieved.ndim
        call = (lambda a, d, i: self.reward_fn(a, d, i)) if self._reward_takes_info else \
            (lambda a, d, i: self.reward_fn(a, d))
        if achieved.ndim == goal_ndim:  # one pair
            return float(call(achieved, desired, info))
        batch = achieved.shape[:achieved.ndim - goal_ndim]
        flat_a = achieved.reshape(-1, *achieved.shape[len(batch):])
        flat_d = desired.reshape(-1, *desired.shape[len(batch):])
        try:
            out = np.asarray(call(flat_a, flat_d, info), dtype=np.float32)
        except Exception:
            out = None
        if out is None or out.shape != (flat_a.shape[0],):  # a function of one pair: row by row
            infos = info if isinstance(info, (list, tuple, np.ndarray)) else [info] * flat_a.shape[0]
            out = np.array([call(a, d, i) for a, d, i in zip(flat_a, flat_d, infos)], dtype=np.float32)
        return out.reshape(batch)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.desired_goal = np.asarray(self._draw_goal(obs), dtype=getattr(self.goal_space, "dtype", None))
        if self.desired_goal.shape != self.goal_space.shape:
            raise ValueError(f"goal_fn returned a goal of shape {self.desired_goal.shape}, expected "
                             f"{self.goal_space.shape} (the goal_space)")
        return self._observe(obs), dict(info)

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        obs, _, terminated, truncated, info = self.env.step(action)
        out = self._observe(obs)
        info = dict(info)
        if self.success_fn is not None:
            info["is_success"] = bool(self.success_fn(out["achieved_goal"], out["desired_goal"]))
            terminated = bool(terminated) or (self.terminate_on_success and info["is_success"])
        reward = self.compute_reward(out["achieved_goal"], out["desired_goal"], info)
        return out, reward, terminated, truncated, info
