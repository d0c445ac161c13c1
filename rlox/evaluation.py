"""Statistical evaluation of RL runs (Agarwal et al., 2021, "Deep RL at the Edge of the
Statistical Precipice") and a policy-evaluation helper.

Scores are final returns, one per run. A 1-D array ``[R]`` holds R runs of one task; a 2-D
array ``[R, T]`` holds R runs on each of T tasks (the layout ``rliable`` uses).

    from rlox.evaluation import interquartile_mean, stratified_bootstrap_ci, performance_profiles
    iqm = interquartile_mean([450, 480, 500, 200, 490])
    lower, upper = stratified_bootstrap_ci([450, 480, 500, 200, 490], n_bootstrap=10_000, ci=0.95)
    profiles = performance_profiles({"rlox": [450, 480, 500]}, thresholds=[100, 300, 500])
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["interquartile_mean", "stratified_bootstrap_ci", "performance_profiles", "evaluate_policy"]


def _as_scores(scores: Any, name: str = "scores") -> np.ndarray:
    """Return ``scores`` as a float64 array of shape [R] or [R, T], checked finite and non-empty."""
    try:
        arr = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a sequence of numbers, got {type(scores).__name__}") from exc
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D [runs] or 2-D [runs, tasks], got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; at least one score is needed")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values; every score must be finite")
    return arr


def _iqm_sorted_rows(sorted_rows: np.ndarray) -> np.ndarray:
    """IQM of each row of an already sorted [B, n] array (same trimming as ``interquartile_mean``)."""
    n = sorted_rows.shape[1]
    cut = int(math.floor(0.25 * n))
    return sorted_rows[:, cut:n - cut].mean(axis=1)


def interquartile_mean(scores: Any) -> float:
    """Mean of the middle 50% of all scores (the top and bottom 25% are discarded).

    Args:
        scores: ``[R]`` or ``[R, T]`` scores; a 2-D array is pooled over runs and tasks, as in
            Agarwal et al. (2021).

    Returns:
        The trimmed mean with ``floor(0.25 * n)`` scores cut from each end (``scipy.stats.trim_mean``
        with ``proportiontocut=0.25``). With fewer than 4 scores nothing is cut.
    """
    arr = np.sort(_as_scores(scores).ravel())
    return float(_iqm_sorted_rows(arr[None, :])[0])


def stratified_bootstrap_ci(
    scores: Any,
    n_bootstrap: int = 10_000,
    ci: float = 0.95,
    *,
    statistic: Callable[[np.ndarray], float] | None = None,
    seed: int | None = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of a statistic (IQM by default).

    Runs are resampled with replacement *within each task* (the stratified bootstrap), so every
    resample keeps the same number of runs per task.

    Args:
        scores: ``[R]`` (one task) or ``[R, T]`` scores.
        n_bootstrap: number of bootstrap resamples, >= 1.
        ci: confidence level in (0, 1), e.g. 0.95 for the 2.5%/97.5% percentiles.
        statistic: function of a ``[R]`` or ``[R, T]`` array returning a float; defaults to
            ``interquartile_mean`` (computed vectorised).
        seed: seed of the resampling generator (None for fresh entropy).

    Returns:
        ``(lower, upper)``.
    """
    arr = _as_scores(scores)
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be an integer >= 1, got {n_bootstrap!r}")
    if not isinstance(ci, (int, float)) or not 0.0 < float(ci) < 1.0:
        raise ValueError(f"ci must be in the open interval (0, 1), got {ci!r}")
    rng = np.random.default_rng(seed)
    scores2d = arr[:, None] if arr.ndim == 1 else arr
    n_runs, n_tasks = scores2d.shape
    # idx[b, r, t]: which run of task t fills slot r of resample b.
    idx = rng.integers(0, n_runs, size=(int(n_bootstrap), n_runs, n_tasks))
    resampled = np.take_along_axis(np.broadcast_to(scores2d, idx.shape), idx, axis=1)
    if statistic is None:
        flat = np.sort(resampled.reshape(int(n_bootstrap), -1), axis=1)
        stats = _iqm_sorted_rows(flat)
    else:
        shape = arr.shape
        stats = np.array([float(statistic(resampled[b].reshape(shape))) for b in range(int(n_bootstrap))])
    alpha = (1.0 - float(ci)) / 2.0
    lower, upper = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lower), float(upper)


def performance_profiles(
    score_dict: Mapping[str, Any], thresholds: Sequence[float]
) -> dict[str, np.ndarray]:
    """Fraction of runs whose score is strictly above each threshold, per method.

    Args:
        score_dict: method name -> ``[R]`` or ``[R, T]`` scores.
        thresholds: ``[K]`` threshold values tau.

    Returns:
        method name -> ``[K]`` float64 array, entry k = mean over all runs (and tasks) of
        ``score > thresholds[k]`` (the run-score distribution of Agarwal et al., 2021).
    """
    if not isinstance(score_dict, Mapping) or not score_dict:
        raise ValueError("score_dict must be a non-empty mapping of method name -> scores")
    taus = np.asarray(thresholds, dtype=np.float64)
    if taus.ndim != 1 or taus.size == 0:
        raise ValueError(f"thresholds must be a non-empty 1-D sequence, got shape {taus.shape}")
    if not np.all(np.isfinite(taus)):
        raise ValueError("thresholds contains NaN or infinite values")
    out = {}
    for name, scores in score_dict.items():
        arr = _as_scores(scores, name=f"score_dict[{name!r}]").ravel()
        out[name] = (arr[None, :] > taus[:, None]).mean(axis=1)
    return out


def _reset_recurrent_state(agent: Any) -> None:
    """Agents with a recurrent state between ``predict`` calls (DreamerV3's ``reset_state``)
    start each episode afresh; a Trainer passes it on to its algorithm."""
    for obj in (agent, getattr(agent, "algo", None)):
        reset = getattr(obj, "reset_state", None)
        if callable(reset):
            reset()
            return


def _make_eval_env(env: Any, seed: int):
    """A single gymnasium env for ``env`` (an id, a registered rlox env name or an env object);
    Dict observations are flattened as in training (``rlox.multi_input``)."""
    from rlox.multi_input import flatten_if_dict

    made, owned = _make_eval_env_unflattened(env, seed)
    return flatten_if_dict(made), owned


def _make_eval_env_unflattened(env: Any, seed: int):
    import gymnasium as gym

    if isinstance(env, gym.Env):
        return env, False
    if not isinstance(env, str):
        raise TypeError(f"env must be an env id string or a gymnasium.Env, got {type(env).__name__}")
    try:
        from rlox.plugins import ENV_REGISTRY
    except ImportError:  # the registry module is optional for evaluation
        ENV_REGISTRY = None
    if env.startswith("ALE/") or env.endswith("NoFrameskip-v4"):
        # As trained (rlox.envs.make_vec_env), but scored on whole games with the real rewards.
        from rlox.wrappers.visual import AtariWrapper, make_atari

        return AtariWrapper(make_atari(env), terminal_on_life_loss=False, clip_reward=False), True
    if env in gym.registry:
        return gym.make(env), True
    if ENV_REGISTRY is not None and env in ENV_REGISTRY:
        made = ENV_REGISTRY.get(env)()
        if not isinstance(made, gym.Env):
            raise TypeError(f"ENV_REGISTRY[{env!r}] returned {type(made).__name__}, expected a gymnasium.Env")
        return made, True
    try:
        return gym.make(env), True
    except gym.error.Error as exc:
        raise ValueError(f"unknown env {env!r}: {exc}") from exc


class _RecurrentActor:
    """obs -> action for a recurrent agent (``predict(obs, state, episode_start)`` returning
    ``(action, state)``, as RecurrentPPO): carries the state, reset by ``reset()`` at each
    episode's start."""

    def __init__(self, predict: Callable[..., Any], deterministic: bool) -> None:
        self.predict, self.deterministic = predict, deterministic
        self.reset()

    def reset(self) -> None:
        self.state, self.start = None, np.ones(1, dtype=bool)

    def __call__(self, obs: np.ndarray) -> Any:
        action, self.state = self.predict(obs, state=self.state, episode_start=self.start,
                                          deterministic=self.deterministic)
        self.start = np.zeros(1, dtype=bool)
        return action


def is_recurrent(agent: Any) -> bool:
    """True for an algorithm (or a Trainer around one) whose ``predict`` carries a state."""
    return bool(getattr(getattr(agent, "algo", agent), "recurrent", False))


def _action_fn(agent: Any, deterministic: bool) -> Callable[[np.ndarray], Any]:
    """A function obs [obs_dim] -> action for an algorithm/Trainer (``predict``) or a plain callable."""
    predict = getattr(agent, "predict", None)
    if callable(predict) and is_recurrent(agent):
        return _RecurrentActor(predict, deterministic)
    if callable(predict):
        return lambda obs: predict(obs, deterministic=deterministic)
    if callable(agent):
        return agent
    raise TypeError(
        f"algo_or_policy must have a predict(obs, deterministic) method or be callable obs -> action, "
        f"got {type(agent).__name__}")


def evaluate_policy(
    algo_or_policy: Any,
    env_id: Any,
    n_episodes: int = 10,
    deterministic: bool = True,
    seed: int = 0,
    *,
    max_episode_steps: int | None = None,
) -> dict[str, Any]:
    """Run full episodes of a policy on a fresh single env and report their returns.

    Args:
        algo_or_policy: an rlox algorithm or Trainer (anything with ``predict(obs, deterministic)``,
            which applies its own observation normalisation), or a callable obs -> action.
        env_id: a gymnasium id, an ``rlox.plugins.ENV_REGISTRY`` name, or a gymnasium env object
            (which is reset but not closed).
        n_episodes: episodes to run, >= 1; episode i is reset with seed ``seed + i``.
        deterministic: passed to ``predict`` (greedy / mean action when True).
        seed: base reset seed.
        max_episode_steps: optional cap on steps per episode (the env's own time limit applies too).

    Returns:
        dict with ``mean_reward``, ``std_reward`` (population std), ``episode_rewards`` [n_episodes],
        ``episode_lengths`` [n_episodes], ``n_episodes``.
    """
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, (int, np.integer)) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an integer >= 1, got {n_episodes!r}")
    if max_episode_steps is not None and max_episode_steps < 1:
        raise ValueError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps!r}")
    act = _action_fn(algo_or_policy, deterministic)
    env, owned = _make_eval_env(env_id, seed)
    returns = np.zeros(int(n_episodes), dtype=np.float64)
    lengths = np.zeros(int(n_episodes), dtype=np.int64)
    discrete = hasattr(env.action_space, "n")
    try:
        for ep in range(int(n_episodes)):
            obs, _ = env.reset(seed=int(seed) + ep)
            if isinstance(act, _RecurrentActor):
                act.reset()
            _reset_recurrent_state(algo_or_policy)
            done, total, steps = False, 0.0, 0
            while not done:
                action = np.asarray(act(np.asarray(obs, dtype=np.float32)))
                action = int(action.reshape(-1)[0]) if discrete else action.reshape(env.action_space.shape)
                obs, reward, terminated, truncated, _ = env.step(action)
                total += float(reward)
                steps += 1
                done = terminated or truncated or (max_episode_steps is not None and steps >= max_episode_steps)
            returns[ep], lengths[ep] = total, steps
    finally:
        if owned:
            env.close()
    return {
        "mean_reward": float(returns.mean()),
        "std_reward": float(returns.std()),
        "episode_rewards": returns,
        "episode_lengths": lengths,
        "n_episodes": int(n_episodes),
    }
