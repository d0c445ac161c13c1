"""Callbacks: lifecycle hooks every rlox algorithm calls, in one place.

Subclass ``Callback`` and override the hooks you need; a hook that returns ``False`` stops
training (any other return value, ``None`` included, continues).

    class StopAt(Callback):
        def on_update(self, metrics):
            return metrics["train/mean_reward"] < 195        # False -> stop

Hooks, in the order an algorithm calls them (``self.algo`` is the algorithm, and
``self.num_timesteps`` its env-step counter, in every hook):

=====================  ==========================================================================
on_training_start()    once per ``train`` call, before the first rollout
on_rollout_start()     before each rollout (on-policy) / collection phase (off-policy)
on_step()              after each vector-env step; only called when a callback overrides it
on_rollout_end(m)      after each rollout, ``m``: rollout metrics (``train/...``)
on_update(m)           after each iteration's gradient updates, ``m``: the iteration's metrics
                       (``train/``, ``loss/``, ``time/`` namespaces)
on_eval(m)             after an evaluation (``eval/...``)
on_training_end(m)     once, when training stops, ``m``: the last metrics
=====================  ==========================================================================

On-policy algorithms also call hooks *inside* their update (r2l's PPO and A2C hook points):

=========================  ======================================================================
on_advantages(batch)       after the rollout's advantages and returns are computed, before any
                           minibatch: may replace ``batch.advantages`` / ``batch.returns`` (same
                           shape) -- all on-policy algorithms (A2C's "before minibatching")
on_minibatch_loss(l, m)    after a minibatch's loss ``l`` is computed, before backward and the
                           optimiser step; ``m``: its detached metrics. Return a tensor to use
                           instead (e.g. ``l * 0.5``), None to keep ``l`` -- PPO, RecurrentPPO,
                           A2C (A2C's "before update")
on_epoch_end(e, m)         after epoch ``e`` (0-based) of PPO / RecurrentPPO; ``m``: the means of
                           this update's minibatch metrics so far (``loss/approx_kl``, ...);
                           False stops the remaining epochs (not training)
on_update_end(m)           after all of an iteration's minibatches, ``m``: the update's
                           ``loss/`` / ``train/`` metrics (may be added to) -- all on-policy
                           algorithms (A2C's "after update")
=========================  ======================================================================

PPO's compiled update (``compiled_update``) runs ``on_advantages``, ``on_epoch_end`` and
``on_update_end`` as the torch update does; it has no torch loss per minibatch, so while a
callback overrides ``on_minibatch_loss`` PPO switches to its torch update (``compiled_update``
becomes False; Adam's state is carried over). See docs/hooks.md for examples.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

__all__ = ["Callback", "CallbackList"]


class Callback:
    """Base class of rlox callbacks (all hooks are no-ops that continue training)."""

    def __init__(self) -> None:
        self.algo: Any = None

    def init_callback(self, algo: Any) -> None:
        """Attach to ``algo``; called by the algorithm before training starts."""
        self.algo = algo

    @property
    def num_timesteps(self) -> int:
        """Env steps taken so far by the attached algorithm (0 before attaching)."""
        return int(getattr(self.algo, "num_timesteps", 0)) if self.algo is not None else 0

    def on_training_start(self) -> bool | None:
        return None

    def on_rollout_start(self) -> bool | None:
        return None

    def on_step(self) -> bool | None:
        return None

    def on_rollout_end(self, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_update(self, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_eval(self, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        return None

    # ---- inside an on-policy update (see the module docstring)
    def on_advantages(self, batch: Any) -> None:
        return None

    def on_minibatch_loss(self, loss: Any, metrics: Mapping[str, Any]) -> Any:
        return None

    def on_epoch_end(self, epoch: int, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_update_end(self, metrics: dict[str, Any]) -> None:
        return None

    # Hooks whose base implementation is overridden tell the algorithm which calls it must make.
    def _overrides(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(Callback, hook)


def _is_callback(obj: Any) -> bool:
    return isinstance(obj, Callback)


class CallbackList:
    """The callbacks of one algorithm, called in order; used by the algorithm base classes.

    Each ``on_*`` returns False as soon as one callback returns False (the rest of the list
    still sees the hook, so loggers and timers stay consistent).
    """

    def __init__(self, callbacks: Iterable[Any] | None = None) -> None:
        items = list(callbacks or [])
        for i, cb in enumerate(items):
            if not _is_callback(cb):
                raise TypeError(f"callbacks[{i}] is a {type(cb).__name__}, expected an "
                                f"rlox.callbacks.Callback (subclass it and override the hooks)")
        self.callbacks: list[Callback] = items
        self.needs_step = any(cb._overrides("on_step") for cb in items)

    @property
    def needs_loss_hook(self) -> bool:
        """A callback overrides ``on_minibatch_loss`` (PPO then uses its torch update)."""
        return any(cb._overrides("on_minibatch_loss") for cb in self.callbacks)

    @property
    def needs_epoch_hook(self) -> bool:
        return any(cb._overrides("on_epoch_end") for cb in self.callbacks)

    def __iter__(self):
        return iter(self.callbacks)

    def __len__(self) -> int:
        return len(self.callbacks)

    def __getitem__(self, i: int) -> Callback:
        return self.callbacks[i]

    def append(self, cb: Callback) -> None:
        if not _is_callback(cb):
            raise TypeError(f"expected an rlox.callbacks.Callback, got {type(cb).__name__}")
        self.callbacks.append(cb)
        self.needs_step = self.needs_step or cb._overrides("on_step")

    def init_callback(self, algo: Any) -> None:
        for cb in self.callbacks:
            cb.init_callback(algo)

    def _all(self, hook: str, *args: Any) -> bool:
        keep_going = True
        for cb in self.callbacks:
            if getattr(cb, hook)(*args) is False:
                keep_going = False
        return keep_going

    def on_training_start(self) -> bool:
        return self._all("on_training_start")

    def on_rollout_start(self) -> bool:
        return self._all("on_rollout_start")

    def on_step(self) -> bool:
        return self._all("on_step") if self.needs_step else True

    def on_rollout_end(self, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_rollout_end", metrics)

    def on_update(self, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_update", metrics)

    def on_eval(self, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_eval", metrics)

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        for cb in self.callbacks:
            cb.on_training_end(metrics)

    def on_advantages(self, batch: Any) -> None:
        for cb in self.callbacks:
            shapes = (tuple(batch.advantages.shape), tuple(batch.returns.shape))
            cb.on_advantages(batch)
            for name, before in zip(("advantages", "returns"), shapes):
                value = getattr(batch, name)
                if not hasattr(value, "shape") or tuple(value.shape) != before:
                    raise ValueError(f"{type(cb).__name__}.on_advantages set batch.{name} to "
                                     f"{getattr(value, 'shape', type(value).__name__)}; expected a tensor of "
                                     f"shape {before} (one value per rollout row)")

    def on_minibatch_loss(self, loss: Any, metrics: Mapping[str, Any]) -> Any:
        """The loss after every callback's ``on_minibatch_loss`` (each sees the previous one's)."""
        for cb in self.callbacks:
            out = cb.on_minibatch_loss(loss, metrics)
            if out is None:
                continue
            if not (hasattr(out, "backward") and getattr(out, "ndim", None) == 0):
                raise TypeError(f"{type(cb).__name__}.on_minibatch_loss returned {type(out).__name__}; "
                                f"expected a 0-d torch tensor to use as the loss, or None to keep it")
            loss = out
        return loss

    def on_epoch_end(self, epoch: int, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_epoch_end", epoch, metrics)

    def on_update_end(self, metrics: dict[str, Any]) -> None:
        for cb in self.callbacks:
            cb.on_update_end(metrics)


# ====================================================================== concrete callbacks
# (below the base; each uses only the hook contract above and public algorithm attributes:
# ``num_timesteps``, ``timings``, ``mean_reward``, ``progress_remaining``, ``save``,
# ``predict``, ``env_id`` and ``report_eval``.)
import math as _math
import os as _os
import re as _re
import sys as _sys
import time as _time
from pathlib import Path as _Path

__all__ += ["EarlyStoppingCallback", "ProgressBarCallback", "TimingCallback", "EvalCallback",
            "CheckpointCallback"]


def _finite(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if _math.isfinite(v) else None


def _check_int(owner: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{owner} {name} must be an int >= {low}, got {value!r}")
    return int(value)


class EarlyStoppingCallback(Callback):
    """Stop training when a metric has not improved by ``min_delta`` for ``patience`` checks.

    A check happens after each iteration (``on_update``) for ``train/`` metrics, and after each
    evaluation (``on_eval``) for ``eval/`` metrics; checks where the metric is missing or NaN
    (no finished episode yet) do not count.

    Args:
        patience: checks without improvement before stopping (>= 1).
        min_delta: an improvement must exceed the best value so far by more than this.
        metric: the metric watched (default ``train/mean_reward``; ``eval/mean_reward`` with an
            ``EvalCallback``).
        mode: "max" (higher is better) or "min".

    Attributes:
        best, wait (checks since the last improvement), stopped_step (None while running).
    """

    def __init__(self, patience: int = 5, min_delta: float = 0.0, metric: str = "train/mean_reward",
                 mode: str = "max") -> None:
        super().__init__()
        self.patience = _check_int("EarlyStoppingCallback", "patience", patience, 1)
        if _finite(min_delta) is None or min_delta < 0:
            raise ValueError(f"EarlyStoppingCallback min_delta must be a finite number >= 0, got {min_delta!r}")
        if mode not in ("max", "min"):
            raise ValueError(f"EarlyStoppingCallback mode must be 'max' or 'min', got {mode!r}")
        self.min_delta = float(min_delta)
        self.metric = str(metric)
        self.mode = mode
        self.best: float | None = None
        self.wait = 0
        self.stopped_step: int | None = None

    def _check(self, metrics: Mapping[str, Any]) -> bool | None:
        value = _finite(metrics.get(self.metric))
        if value is None:
            return None
        gain = value - self.best if (self.best is not None and self.mode == "max") else \
            (self.best - value if self.best is not None else _math.inf)
        if gain > self.min_delta:
            self.best, self.wait = value, 0
            return None
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_step = self.num_timesteps
            return False
        return None

    def on_update(self, metrics: Mapping[str, Any]) -> bool | None:
        return None if self.metric.startswith("eval/") else self._check(metrics)

    def on_eval(self, metrics: Mapping[str, Any]) -> bool | None:
        return self._check(metrics) if self.metric.startswith("eval/") else None


class ProgressBarCallback(Callback):
    """A tqdm progress bar over the ``train`` call's env steps, with the mean training reward
    and steps/second in the bar (``reward=...``, ``sps=...``).

    Args:
        file: stream of the bar (default ``sys.stderr``).
        **tqdm_kwargs: more ``tqdm`` arguments (``ncols``, ``mininterval``, ``disable``, ...).
    """

    def __init__(self, file: Any = None, **tqdm_kwargs: Any) -> None:
        super().__init__()
        self.file = file
        self.tqdm_kwargs = tqdm_kwargs
        self.bar: Any = None
        self._last = 0

    def on_training_start(self) -> None:
        from tqdm.auto import tqdm

        algo = self.algo
        total = int(getattr(algo, "remaining_timesteps", 0))
        self._last = algo.num_timesteps
        kwargs = {"unit": "step", "unit_scale": True, "dynamic_ncols": True, "mininterval": 0.25,
                  "desc": f"{getattr(algo, 'name', '') or type(algo).__name__}", **self.tqdm_kwargs}
        self.bar = tqdm(total=max(total, 0), file=self.file if self.file is not None else _sys.stderr, **kwargs)

    def on_update(self, metrics: Mapping[str, Any]) -> None:
        if self.bar is None:
            return
        step = self.num_timesteps
        reward = _finite(metrics.get("train/mean_reward"))
        sps = _finite(metrics.get("time/sps"))
        self.bar.set_postfix_str(f"reward={reward:.2f}, sps={sps:,.0f}" if reward is not None and sps is not None
                                 else f"reward=-, sps={sps or 0:,.0f}", refresh=False)
        self.bar.update(step - self._last)
        self._last = step

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class TimingCallback(Callback):
    """Where the wall time of training went, per phase the algorithm times.

    Phases come from ``algo.timings`` (cumulative seconds): on-policy algorithms report
    ``env_step``, ``policy_forward``, ``gae_compute`` and ``gradient_update``; the training loop
    adds ``callbacks`` (callbacks and loggers) and evaluating callbacks add ``evaluation``.

        timing = TimingCallback()
        ...train...
        timing.summary()   # {'env_step': 42.1, 'gae_compute': 8.3, 'gradient_update': 45.0, ..., 'other': 1.2}

    Covers every ``train`` call the callback was attached to.
    """

    def __init__(self) -> None:
        super().__init__()
        self.wall_seconds = 0.0
        self.phase_seconds: dict[str, float] = {}
        self._t0: float | None = None
        self._start: dict[str, float] = {}

    def on_training_start(self) -> None:
        self._t0 = _time.perf_counter()
        self._start = dict(self.algo.timings)

    def _running(self) -> tuple[float, dict[str, float]]:
        wall, phases = self.wall_seconds, dict(self.phase_seconds)
        if self._t0 is not None and self.algo is not None:
            wall += _time.perf_counter() - self._t0
            for k, v in self.algo.timings.items():
                phases[k] = phases.get(k, 0.0) + v - self._start.get(k, 0.0)
        return wall, phases

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self._t0 is not None:
            self.wall_seconds, self.phase_seconds = self._running()
            self._t0 = None

    def timings(self) -> dict[str, float]:
        """Seconds per phase, plus ``total`` (wall time of training)."""
        wall, phases = self._running()
        return {**phases, "total": wall}

    def summary(self) -> dict[str, float]:
        """Percent of training wall time per phase (one decimal); ``other`` is the rest (loop
        overhead, anything no phase covers), so the values add up to 100."""
        wall, phases = self._running()
        if wall <= 0:
            return {}
        out = {k: round(100.0 * v / wall, 1) for k, v in phases.items() if v > 0}
        rest = wall - sum(v for v in phases.values() if v > 0)
        if rest > 0:
            out["other"] = round(100.0 * rest / wall, 1)
        return out


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
                 deterministic: bool = True, best_model_save_path: str | _os.PathLike | None = None,
                 log_path: str | _os.PathLike | None = None, reward_threshold: float | None = None,
                 eval_at_end: bool = True, seed: int = 0, verbose: int = 0) -> None:
        super().__init__()
        self.eval_freq = _check_int("EvalCallback", "eval_freq", eval_freq, 1)
        self.n_eval_episodes = _check_int("EvalCallback", "n_eval_episodes", n_eval_episodes, 1)
        if reward_threshold is not None and _finite(reward_threshold) is None:
            raise ValueError(f"EvalCallback reward_threshold must be a finite number or None, got {reward_threshold!r}")
        self.eval_env = eval_env
        self.deterministic = bool(deterministic)
        self.best_model_save_path = _Path(best_model_save_path) if best_model_save_path is not None else None
        self.log_path = _Path(log_path) if log_path is not None else None
        self.reward_threshold = None if reward_threshold is None else float(reward_threshold)
        self.eval_at_end = bool(eval_at_end)
        self.seed = int(seed)
        self.verbose = int(verbose)
        self.best_mean_reward = -_math.inf
        self.best_step: int | None = None
        self.last_mean_reward = _math.nan
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
        t0 = _time.perf_counter()
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
        elapsed = _time.perf_counter() - t0
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


def _append_csv(path: _Path, columns: Sequence[str], row: Mapping[str, Any], fresh: bool) -> None:
    """Append ``row`` (``columns`` only) to ``path``; ``fresh`` starts the file with a header."""
    import csv

    with open(path, "w" if fresh or not path.exists() else "a", newline="") as fh:
        w = csv.writer(fh)
        if fresh or fh.tell() == 0:
            w.writerow(columns)
        w.writerow([row[c] for c in columns])


class CheckpointCallback(Callback):
    """Save the full training state every ``save_freq`` env steps, keeping the last ``keep_last``.

    Files are ``<save_path>/<name_prefix>_<steps>_steps.pt``, written atomically by
    ``algo.save`` (a crash mid-save leaves the previous checkpoints intact) and readable with
    ``weights_only=True``. Resume with ``PPO.load(path)`` then ``train(resume=True)``.

    Args:
        save_freq: env steps (all envs together) between checkpoints.
        save_path: directory (created).
        name_prefix: file name prefix.
        keep_last: keep only this many newest checkpoints with this prefix (None: keep all);
            checkpoints of an earlier run in the same directory count too.
        save_final: also save when training ends.

    Attributes:
        saved: paths written by this callback, oldest first.
    """

    def __init__(self, save_freq: int, save_path: str | _os.PathLike = "checkpoints", name_prefix: str = "rl_model",
                 keep_last: int | None = None, save_final: bool = False) -> None:
        super().__init__()
        self.save_freq = _check_int("CheckpointCallback", "save_freq", save_freq, 1)
        if keep_last is not None:
            keep_last = _check_int("CheckpointCallback", "keep_last", keep_last, 1)
        if not name_prefix or not _re.fullmatch(r"[A-Za-z0-9._-]+", name_prefix):
            raise ValueError(f"CheckpointCallback name_prefix must be letters, digits, '.', '_' or '-', "
                             f"got {name_prefix!r}")
        self.save_path = _Path(save_path)
        self.name_prefix = name_prefix
        self.keep_last = keep_last
        self.save_final = bool(save_final)
        self.saved: list[_Path] = []
        self._last: int | None = None

    def init_callback(self, algo: Any) -> None:
        super().init_callback(algo)
        self.save_path.mkdir(parents=True, exist_ok=True)
        if self._last is None:
            self._last = algo.num_timesteps

    def path_for(self, step: int) -> _Path:
        return self.save_path / f"{self.name_prefix}_{int(step)}_steps.pt"

    def existing(self) -> list[_Path]:
        """Checkpoints with this prefix in ``save_path``, oldest (fewest steps) first."""
        pat = _re.compile(_re.escape(self.name_prefix) + r"_(\d+)_steps\.pt")
        found = [(int(m.group(1)), p) for p in self.save_path.iterdir() if (m := pat.fullmatch(p.name))]
        return [p for _, p in sorted(found)]

    def save(self) -> _Path:
        """Save now; returns the path."""
        path = self.path_for(self.num_timesteps)
        self.algo.save(path)
        self._last = self.num_timesteps
        if path not in self.saved:
            self.saved.append(path)
        if self.keep_last is not None:
            for old in self.existing()[:-self.keep_last]:
                if old.is_dir():      # LLM algorithms save a directory (save_pretrained layout)
                    import shutil
                    shutil.rmtree(old, ignore_errors=True)
                old.unlink(missing_ok=True)
                if old in self.saved:
                    self.saved.remove(old)
        return path

    def on_update(self, metrics: Mapping[str, Any]) -> None:
        if self.num_timesteps - self._last >= self.save_freq:
            self.save()

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.save_final and self.algo is not None and self.num_timesteps != self._last:
            self.save()
