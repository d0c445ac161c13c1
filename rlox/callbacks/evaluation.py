"""``EvalCallback``: periodic deterministic evaluation on a separate env, with the best model
saved and the evaluations written as CSV rows (the episodes run through ``rlox.evaluation``)."""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any, Mapping

from rlox.callbacks._common import _append_csv, _check_int, _finite
from rlox.callbacks.base import Callback


def _separate_env(env: Any) -> Any:
    """A fresh env like ``env`` (an id string is used as it is; a gymnasium env object is
    rebuilt from its spec, or deep-copied), so evaluation never steps the training env."""
    if env is None or isinstance(env, str):
        return env
    if isinstance(env, (list, tuple)) and env and callable(env[0]):
        return env[0]()        # factories (the training env's): one fresh env from the first
    spec = getattr(env, "spec", None)
    if spec is not None:
        import gymnasium as gym

        try:
            return gym.make(spec)
        except Exception:  # a spec that cannot be rebuilt: fall back to a copy
            pass
    import copy

    return copy.deepcopy(env)


class EvalCallback(Callback):
    """Periodic evaluation on a separate env, keeping the best model.

    Every ``eval_freq`` env steps (and when the budget is spent, ``eval_at_end``) it runs
    ``n_eval_episodes`` full episodes with ``algo.predict(obs, deterministic)``, which uses the
    frozen observation statistics when normalisation is on. Episode ``i`` is reset with seed
    ``seed + i`` every time, so successive evaluations are comparable. Results go to the
    callbacks' ``on_eval`` and to the loggers as ``eval/mean_reward``, ``eval/std_reward``,
    ``eval/mean_length``, ``eval/best_mean_reward``. Multi-agent models (MAPPO/IPPO) are
    scored by their mean per-agent episode return on a fresh multi-agent vector env, and each
    agent's return is logged as ``eval/<agent>/mean_reward``.

    Args:
        eval_env: env id or gymnasium env (default: a fresh env like the training one);
            multi-agent: an MPE name, a PettingZoo env or a multi-agent vector env.
        eval_freq: env steps (all envs together) between evaluations.
        n_eval_episodes: episodes per evaluation.
        deterministic: greedy / mean actions (default True).
        best_model_save_path: directory; a new best is saved there as ``best_model.pt``.
        log_path: directory; each evaluation appends a row to ``evaluations.csv``
            (``step,mean_reward,std_reward,episodes``).
        reward_threshold: stop training once an evaluation's mean reaches this.
        eval_at_end: also evaluate at the last iteration of the run.
        seed: reset seed of the first episode.
        verbose: 1 prints one line per evaluation.

    Attributes:
        best_mean_reward, best_step, last_mean_reward, evaluations (list of dicts).
    """

    def __init__(self, eval_env: Any = None, eval_freq: int = 10_000, n_eval_episodes: int = 5,
                 deterministic: bool = True, best_model_save_path: str | os.PathLike | None = None,
                 log_path: str | os.PathLike | None = None, reward_threshold: float | None = None,
                 eval_at_end: bool = True, seed: int = 0, verbose: int = 0) -> None:
        super().__init__()
        self.eval_freq = _check_int("EvalCallback", "eval_freq", eval_freq, 1)
        self.n_eval_episodes = _check_int("EvalCallback", "n_eval_episodes", n_eval_episodes, 1)
        if reward_threshold is not None and _finite(reward_threshold) is None:
            raise ValueError(f"EvalCallback reward_threshold must be a finite number or None, got {reward_threshold!r}")
        self.eval_env = eval_env
        self.deterministic = bool(deterministic)
        self.best_model_save_path = Path(best_model_save_path) if best_model_save_path is not None else None
        self.log_path = Path(log_path) if log_path is not None else None
        self.reward_threshold = None if reward_threshold is None else float(reward_threshold)
        self.eval_at_end = bool(eval_at_end)
        self.seed = int(seed)
        self.verbose = int(verbose)
        self.best_mean_reward = -math.inf
        self.best_step: int | None = None
        self.last_mean_reward = math.nan
        self.evaluations: list[dict[str, Any]] = []
        self._env: Any = None
        self._envs: list[Any] | None = None
        self._last_eval: int | None = None

    def init_callback(self, algo: Any) -> None:
        super().init_callback(algo)
        if self._env is None:
            self._env = _separate_env(self.eval_env if self.eval_env is not None else algo.env_id)
        if self._last_eval is None:
            self._last_eval = algo.num_timesteps
        for d in (self.best_model_save_path, self.log_path):
            if d is not None:
                d.mkdir(parents=True, exist_ok=True)

    def _due(self) -> bool:
        step = self.num_timesteps
        if step - self._last_eval >= self.eval_freq:
            return True
        return self.eval_at_end and self.algo.progress_remaining <= 0 and step != self._last_eval

    def on_update(self, metrics: Mapping[str, Any]) -> bool | None:
        if not self._due():
            return None
        return self.evaluate()

    def _run_episodes(self) -> dict[str, Any]:
        """``n_eval_episodes`` episodes through ``rlox.evaluation``'s episode runner (the one
        ``evaluate_policy`` uses): one batched ``predict`` per step over envs made once and
        reused. Single-agent: one env per episode, episode ``i`` reset with ``seed + i``;
        multi-agent (MAPPO/IPPO): a multi-agent vector env of ``min(n_eval_episodes, 64)``
        envs, reset with ``seed`` at every evaluation."""
        from rlox.evaluation import (_make_eval_env, is_multi_agent, make_multiagent_eval_env, run_episodes,
                                     run_multiagent_episodes)

        n = self.n_eval_episodes
        if is_multi_agent(self.algo, self._env):
            if self._envs is None:
                self._envs = make_multiagent_eval_env(self.algo, self._env, min(n, 64), self.seed)[0]
            return run_multiagent_episodes(self.algo, self._envs, n, self.deterministic, self.seed)
        if self._envs is None:  # self._env is already separate from training; copies for the rest
            self._envs = [_make_eval_env(self._env if i == 0 or isinstance(self._env, str)
                                         else _separate_env(self._env), self.seed)[0]
                          for i in range(n)]
        return run_episodes(self.algo, self._envs, n, self.deterministic, self.seed)

    def evaluate(self) -> bool:
        """Evaluate now; returns False when the reward threshold is reached (or another
        callback's ``on_eval`` asks to stop)."""
        t0 = time.perf_counter()
        res = self._run_episodes()
        step = self.num_timesteps
        self._last_eval = step
        mean, std = res["mean_reward"], res["std_reward"]
        self.last_mean_reward = mean
        record = {"step": step, "mean_reward": mean, "std_reward": std, "episodes": res["n_episodes"],
                  "mean_length": float(res["episode_lengths"].mean())}
        if res.get("agent_rewards"):
            record["agent_rewards"] = dict(res["agent_rewards"])
        self.evaluations.append(record)
        new_best = mean > self.best_mean_reward
        if new_best:
            self.best_mean_reward, self.best_step = mean, step
        self._on_evaluated(record, new_best)
        elapsed = time.perf_counter() - t0
        time_phase = getattr(self.algo, "time_phase", None)
        if callable(time_phase):
            time_phase("evaluation", elapsed)
        if self.verbose:
            print(f"eval step={step} | reward={mean:.2f} +- {std:.2f} | best={self.best_mean_reward:.2f}"
                  + (" (new best)" if new_best else ""), flush=True)
        metrics = {"eval/mean_reward": mean, "eval/std_reward": std, "eval/mean_length": record["mean_length"],
                   "eval/best_mean_reward": self.best_mean_reward, "eval/episodes": res["n_episodes"],
                   "time/evaluation": elapsed}
        for agent, r in (res.get("agent_rewards") or {}).items():     # multi-agent: each agent's return
            metrics[f"eval/{agent}/mean_reward"] = r
        report = getattr(self.algo, "report_eval", None)
        keep_going = report(metrics) if callable(report) else True
        if self.reward_threshold is not None and mean >= self.reward_threshold:
            keep_going = False
        return keep_going is not False

    def _on_evaluated(self, record: Mapping[str, Any], new_best: bool) -> None:
        """Write the evaluation row and the best model (subclasses add their artifacts)."""
        if self.log_path is not None:
            _append_csv(self.log_path / "evaluations.csv", ("step", "mean_reward", "std_reward", "episodes"),
                        record, fresh=len(self.evaluations) == 1)
        if new_best and self.best_model_save_path is not None:
            self.algo.save(self.best_model_save_path / "best_model.pt")

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        # A run stopped early by another callback still gets its final evaluation.
        if self.eval_at_end and self.algo is not None and self.num_timesteps != self._last_eval:
            self.evaluate()
