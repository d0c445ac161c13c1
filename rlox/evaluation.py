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

__all__ = ["interquartile_mean", "stratified_bootstrap_ci", "performance_profiles", "evaluate_policy",
           "run_episodes", "run_multiagent_episodes", "is_multi_agent"]


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


def _make_eval_env(env: Any, seed: int):
    """A single gymnasium env for ``env`` (an id, a registered rlox env name or an env object);
    Dict, Discrete, Tuple, ... observations are flattened as in training (``rlox.multi_input``)."""
    from rlox.multi_input import flatten_structured

    made, owned = _make_eval_env_unflattened(env, seed)
    return flatten_structured(made), owned


def _make_eval_env_unflattened(env: Any, seed: int):
    import gymnasium as gym

    if isinstance(env, gym.Env):
        return env, False
    if callable(env) and not isinstance(env, str):
        # An env factory, as training takes one: the env it makes is ours to close.
        made = env()
        from rlox.multi_input import missing_env_attributes

        if missing_env_attributes(made):
            raise TypeError(f"the env factory {getattr(env, '__name__', env)!r} returned "
                            f"{type(made).__name__}, expected a gymnasium.Env")
        return made, True
    if not isinstance(env, str):
        raise TypeError("env must be an env id string, a gymnasium.Env or an env factory (a callable "
                        f"returning a gymnasium.Env), got {type(env).__name__}")
    try:
        from rlox.plugins import ENV_REGISTRY
    except ImportError:  # the registry module is optional for evaluation
        ENV_REGISTRY = None
    from rlox.wrappers.visual import is_atari_id

    if is_atari_id(env):
        # As trained (rlox.envs.make_vec_env), but scored on whole games with the real rewards.
        from rlox.wrappers.visual import AtariWrapper, make_atari

        return AtariWrapper(make_atari(env), terminal_on_life_loss=False, clip_reward=False), True
    if env in gym.registry:
        return gym.make(env), True
    if ENV_REGISTRY is not None and env in ENV_REGISTRY:
        made = ENV_REGISTRY.get(env)()
        from rlox.multi_input import missing_env_attributes

        if missing_env_attributes(made):
            raise TypeError(f"ENV_REGISTRY[{env!r}] returned {type(made).__name__}, expected a gymnasium.Env")
        return made, True
    try:
        return gym.make(env), True
    except gym.error.Error as exc:
        raise ValueError(f"unknown env {env!r}: {exc}") from exc


def is_recurrent(agent: Any) -> bool:
    """True for an algorithm (or a Trainer around one) whose ``predict`` carries a state."""
    return bool(getattr(getattr(agent, "algo", agent), "recurrent", False))


def is_multi_agent(agent: Any, env: Any = None) -> bool:
    """True when ``agent`` is a multi-agent model (MAPPO/IPPO, a Trainer around one, a
    ``MultiAgentInferencePolicy``) or ``env`` is a multi-agent env: a multi-agent vector env,
    a PettingZoo env, or an MPE name such as ``"spread_v3"``."""
    if getattr(getattr(agent, "algo", agent), "multi_agent", False):
        return True
    if env is None or isinstance(env, (list, tuple)):
        return False
    if isinstance(env, str):
        import gymnasium as gym

        if env in gym.registry:
            return False
        from rlox.multiagent.envs import resolve_mpe_name

        return resolve_mpe_name(env) is not None
    return hasattr(env, "possible_agents")


def _is_rlox_model(agent: Any) -> bool:
    """rlox's algorithms, Trainers and inference policies take a batch of observations in one
    ``predict``; other objects and callables get one observation per call."""
    import sys

    kinds = []
    for module, name in (("rlox.algorithms.base", "Algorithm"), ("rlox.trainer", "Trainer"),
                         ("rlox.inference", "InferencePolicy")):
        mod = sys.modules.get(module)
        if mod is not None and hasattr(mod, name):
            kinds.append(getattr(mod, name))
    return bool(kinds) and isinstance(agent, tuple(kinds))


def _accepts_env_ids(fn: Callable[..., Any]) -> bool:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


class _BatchActor:
    """Actions for the observations of ``n`` env slots stepped side by side.

    rlox models get one batched ``predict`` per step over every slot (a fixed batch, so a
    recurrent state keeps its rows: an LSTM state ``(h, c)`` is carried with
    ``episode_start`` per slot, DreamerV3's implicit state is reset with
    ``reset_state([slot])``). Other agents (a duck-typed ``predict`` or a callable obs ->
    action) are called once per active slot."""

    def __init__(self, agent: Any, deterministic: bool, n: int) -> None:
        self.agent, self.deterministic, self.n = agent, bool(deterministic), int(n)
        predict = getattr(agent, "predict", None)
        if not callable(predict) and not callable(agent):
            raise TypeError(
                f"algo_or_policy must have a predict(obs, deterministic) method or be callable obs -> action, "
                f"got {type(agent).__name__}")
        self.recurrent = callable(predict) and is_recurrent(agent)
        self.batched = callable(predict) and (_is_rlox_model(agent) or self.recurrent)
        act = getattr(agent, "act", None)
        # rlox.inference.InferencePolicy: act(obs, deterministic) takes a batch
        self.batched_act = act if not callable(predict) and callable(act) and _is_rlox_model(agent) else None
        self.state: Any = None
        self.starts = np.ones(self.n, dtype=bool)
        holder = next((o for o in (agent, getattr(agent, "algo", None))
                       if callable(getattr(o, "reset_state", None))), None)
        self.reset_state = holder.reset_state if holder is not None else None
        if self.reset_state is not None and self.n > 1 and not (self.batched and _accepts_env_ids(self.reset_state)):
            raise ValueError(f"{type(agent).__name__} keeps a state between predict calls that cannot be reset per "
                             f"env; evaluate it on one env at a time (n_envs=1)")

    def reset_all(self) -> None:
        """Forget an implicit ``predict`` state (``reset_state()``) before a run: it may hold
        another batch size (a previous run on more or fewer envs)."""
        self.state = None
        if self.reset_state is not None:
            self.reset_state()

    def episode_start(self, slot: int) -> None:
        self.starts[slot] = True
        if self.reset_state is not None:
            if self.n == 1 and not (self.batched and _accepts_env_ids(self.reset_state)):
                self.reset_state()
            else:
                self.reset_state([slot])

    def __call__(self, obs: np.ndarray, active: Sequence[int]) -> list[Any]:
        """obs ``[n, *obs]`` (rows of inactive slots are ignored) -> one action per active slot."""
        if self.batched_act is not None:
            actions = np.asarray(self.batched_act(obs, self.deterministic))
            return [actions[k] for k in active]
        if not self.batched:
            predict = getattr(self.agent, "predict", None)
            if callable(predict):
                return [predict(obs[k], deterministic=self.deterministic) for k in active]
            return [self.agent(obs[k]) for k in active]
        if self.recurrent:
            actions, self.state = self.agent.predict(obs, state=self.state, episode_start=self.starts.copy(),
                                                     deterministic=self.deterministic)
        else:
            actions = self.agent.predict(obs, deterministic=self.deterministic)
        self.starts[:] = False
        actions = np.asarray(actions)
        return [actions[k] for k in active]


def run_episodes(agent: Any, envs: Sequence[Any], n_episodes: int, deterministic: bool = True, seed: int = 0,
                 max_episode_steps: int | None = None) -> dict[str, Any]:
    """The episode runner of ``evaluate_policy`` and ``EvalCallback``: ``n_episodes`` episodes on
    the gymnasium envs ``envs`` stepped side by side (one batched ``predict`` per step for rlox
    models). Episode ``i`` is reset with seed ``seed + i`` whichever env runs it, so the returns
    do not depend on how many envs there are; an env that finishes an episode starts the next
    one not yet started. The envs are reset, never closed.

    Returns:
        dict with ``mean_reward``, ``std_reward`` (population std), ``episode_rewards``
        [n_episodes], ``episode_lengths`` [n_episodes], ``n_episodes``.
    """
    n, slots = int(n_episodes), len(envs)
    if slots < 1:
        raise ValueError("run_episodes needs at least one env")
    act = _BatchActor(agent, deterministic, slots)
    act.reset_all()
    returns = np.zeros(n, dtype=np.float64)
    lengths = np.zeros(n, dtype=np.int64)
    discrete = [hasattr(env.action_space, "n") for env in envs]
    episode = [-1] * slots          # the episode each env runs (-1: none left)
    obs: list[np.ndarray | None] = [None] * slots
    started = 0

    def start(k: int) -> None:
        nonlocal started
        if started >= n:
            episode[k] = -1
            return
        episode[k] = started
        o, _ = envs[k].reset(seed=int(seed) + started)
        obs[k] = np.asarray(o, dtype=np.float32)
        started += 1
        act.episode_start(k)

    for k in range(min(slots, n)):
        start(k)
    batch = np.stack([o if o is not None else obs[0] for o in obs])
    while True:
        active = [k for k in range(slots) if episode[k] >= 0]
        if not active:
            break
        actions = act(batch, active)
        for k, a in zip(active, actions):
            a = np.asarray(a)
            a = int(a.reshape(-1)[0]) if discrete[k] else a.reshape(envs[k].action_space.shape)
            o, reward, terminated, truncated, _ = envs[k].step(a)
            i = episode[k]
            returns[i] += float(reward)
            lengths[i] += 1
            batch[k] = np.asarray(o, dtype=np.float32)
            if terminated or truncated or (max_episode_steps is not None and lengths[i] >= max_episode_steps):
                start(k)
                if episode[k] >= 0:
                    batch[k] = obs[k]
    return {
        "mean_reward": float(returns.mean()),
        "std_reward": float(returns.std()),
        "episode_rewards": returns,
        "episode_lengths": lengths,
        "n_episodes": n,
    }


# ============================================================================ multi-agent
def _multiagent_action_fn(agent: Any, deterministic: bool) -> Callable[[dict], Mapping[str, Any]]:
    predict = getattr(agent, "predict", None)
    if callable(predict):
        return lambda obs: predict(obs, deterministic=deterministic)
    if callable(agent):
        return agent
    raise TypeError(f"a multi-agent policy must have predict(obs_dict, deterministic) or be callable "
                    f"obs_dict -> action_dict, got {type(agent).__name__}")


def make_multiagent_eval_env(agent: Any, env: Any, n_envs: int, seed: int) -> tuple[Any, bool]:
    """(multi-agent vector env, whether the caller owns it) for evaluating ``agent`` on ``env``.

    ``env`` may be a multi-agent vector env (used as it is), None (the model's own scenario),
    an MPE / ``ENV_REGISTRY`` name, a PettingZoo env (copied: never the training env) or a
    factory. A model's scenario settings (``n_agents``, ``max_cycles``, ``native``, ...) come
    from its ``env_config``."""
    import copy

    from rlox.multiagent.envs import make_multiagent_vec_env

    if hasattr(env, "possible_agents") and hasattr(env, "n_envs") and callable(getattr(env, "step", None)):
        return env, False
    algo = getattr(agent, "algo", agent)
    if env is None:
        env = getattr(algo, "env_id", None)
        if env is None:
            raise ValueError(f"no env to evaluate {type(agent).__name__} on: pass env_id (an MPE name such as "
                             f"'spread_v3', a PettingZoo env or a multi-agent vector env)")
    if hasattr(env, "possible_agents"):
        env = copy.deepcopy(env)
    config = dict(getattr(algo, "env_config", None) or {})
    return make_multiagent_vec_env(env, int(n_envs), int(seed), **config), True


def run_multiagent_episodes(agent: Any, venv: Any, n_episodes: int, deterministic: bool = True, seed: int = 0,
                            max_episode_steps: int | None = None) -> dict[str, Any]:
    """``n_episodes`` episodes of a multi-agent vector env (``MultiAgentVecEnv`` /
    ``PettingZooVecEnv``), one batched ``predict({agent: obs [n_envs, obs_dim]})`` per step.

    The env is reset with ``seed`` (its env ``e`` draws from ``seed + e``); env ``e`` runs
    episodes ``e, e + n_envs, ...``, so which episodes are counted does not depend on their
    lengths. An agent's return sums its rewards while it is alive; an episode's return is the
    mean over its agents (MAPPO's ``mean_reward``). An episode cut by ``max_episode_steps``
    is counted, and its env's next counted episode starts when that env resets.

    Returns:
        dict with ``mean_reward`` (mean per-agent episode return), ``std_reward``,
        ``episode_rewards`` [n_episodes], ``episode_lengths`` [n_episodes], ``n_episodes``,
        ``agents`` (names), ``agent_rewards`` {agent: mean episode return} and
        ``episode_agent_rewards`` [n_episodes, n_agents].
    """
    n, E, agents = int(n_episodes), int(venv.n_envs), list(venv.possible_agents)
    A = len(agents)
    dims = list(getattr(venv, "obs_dims", [None] * A))
    act = _multiagent_action_fn(agent, deterministic)
    quota = np.array([len(range(e, n, E)) for e in range(E)])
    counted = np.zeros(E, dtype=np.int64)
    skipping = np.zeros(E, dtype=bool)           # cut by max_episode_steps: wait for the env's reset
    ep_ret, ep_len = np.zeros((E, A)), np.zeros(E, dtype=np.int64)
    per_agent = np.zeros((n, A))
    lengths = np.zeros(n, dtype=np.int64)
    out = venv.reset(seed=int(seed))
    while (counted < quota).any():
        obs, alive = out["obs"], np.array(out["alive"])
        actions = act({a: np.array(obs[:, j, :dims[j]]) for j, a in enumerate(agents)})
        if not isinstance(actions, Mapping):
            raise TypeError(f"a multi-agent policy must return a dict {{agent: actions}}, got "
                            f"{type(actions).__name__}")
        out = venv.step(actions)
        ep_ret += np.where(alive, out["rewards"], 0.0)
        ep_len += 1
        done = np.array(out["done"])
        cut = np.zeros(E, dtype=bool) if max_episode_steps is None else (ep_len >= max_episode_steps) & ~skipping
        for e in np.flatnonzero(done | cut):
            if not skipping[e] and counted[e] < quota[e]:
                i = e + counted[e] * E
                per_agent[i], lengths[i] = ep_ret[e], ep_len[e]
                counted[e] += 1
            skipping[e] = bool(cut[e] and not done[e])
            ep_ret[e], ep_len[e] = 0.0, 0
    returns = per_agent.mean(axis=1)
    return {
        "mean_reward": float(returns.mean()),
        "std_reward": float(returns.std()),
        "episode_rewards": returns,
        "episode_lengths": lengths,
        "n_episodes": n,
        "agents": agents,
        "agent_rewards": {a: float(per_agent[:, j].mean()) for j, a in enumerate(agents)},
        "episode_agent_rewards": per_agent,
    }


# ============================================================================ the entry point
def evaluate_policy(
    algo_or_policy: Any,
    env_id: Any,
    n_episodes: int = 10,
    deterministic: bool = True,
    seed: int = 0,
    *,
    max_episode_steps: int | None = None,
    n_envs: int | None = None,
) -> dict[str, Any]:
    """Run full episodes of a policy on fresh envs, stepped side by side, and report their returns.

    Single-agent: episode ``i`` is reset with seed ``seed + i`` (the returns do not depend on
    ``n_envs``). Multi-agent (MAPPO/IPPO, a ``MultiAgentInferencePolicy``, or a multi-agent
    env): episodes of a fresh multi-agent vector env seeded ``seed``, see
    ``run_multiagent_episodes``; the result adds the per-agent returns.

    Args:
        algo_or_policy: an rlox algorithm or Trainer (anything with ``predict(obs, deterministic)``,
            which applies its own observation normalisation), or a callable obs -> action
            (multi-agent: ``{agent: obs}`` -> ``{agent: action}``). rlox models get one batched
            ``predict`` per step; other objects one call per observation.
        env_id: a gymnasium id, an ``rlox.plugins.ENV_REGISTRY`` name, or a gymnasium env object
            (which is reset but not closed, and runs the episodes one after the other).
            Multi-agent: an MPE name, a PettingZoo env (copied), a multi-agent vector env (used
            as it is), or None for the model's own scenario.
        n_episodes: episodes to run, >= 1.
        deterministic: passed to ``predict`` (greedy / mean action when True).
        seed: base reset seed.
        max_episode_steps: optional cap on steps per episode (the env's own time limit applies too).
        n_envs: envs stepped side by side (default: ``min(n_episodes, 16)``; multi-agent
            ``min(n_episodes, 64)``; an agent with an implicit ``predict`` state reset by
            ``reset_state``, as DreamerV3, runs one env unless ``n_envs`` is given).

    Returns:
        dict with ``mean_reward``, ``std_reward`` (population std), ``episode_rewards`` [n_episodes],
        ``episode_lengths`` [n_episodes], ``n_episodes``; multi-agent also ``agents``,
        ``agent_rewards`` and ``episode_agent_rewards`` [n_episodes, n_agents].
    """
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, (int, np.integer)) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an integer >= 1, got {n_episodes!r}")
    if max_episode_steps is not None and max_episode_steps < 1:
        raise ValueError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps!r}")
    if n_envs is not None and (isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1):
        raise ValueError(f"n_envs must be an integer >= 1 or None, got {n_envs!r}")
    if is_multi_agent(algo_or_policy, env_id):
        venv, owned = make_multiagent_eval_env(algo_or_policy, env_id, n_envs or min(int(n_episodes), 64), seed)
        try:
            return run_multiagent_episodes(algo_or_policy, venv, int(n_episodes), deterministic, seed,
                                           max_episode_steps)
        finally:
            if owned:
                venv.close()
    if env_id is None:
        env_id = getattr(getattr(algo_or_policy, "algo", algo_or_policy), "env_id", None)
        if env_id is None:
            raise ValueError("env_id is None and the policy records no env; pass a gymnasium id or env")
    _BatchActor(algo_or_policy, deterministic, 1)      # a bad policy fails before any env is made
    import gymnasium as gym

    if isinstance(env_id, gym.Env):
        envs, owned = [_make_eval_env(env_id, seed)[0]], False
    else:
        k = n_envs or min(int(n_episodes), 16)
        if (n_envs is None or not _is_rlox_model(algo_or_policy)) and any(
                callable(getattr(o, "reset_state", None)) for o in (algo_or_policy,
                                                                    getattr(algo_or_policy, "algo", None))):
            k = 1        # an implicit predict state (DreamerV3): one episode at a time unless n_envs is given
        envs, owned = [], True
        try:
            for _ in range(k):
                envs.append(_make_eval_env(env_id, seed)[0])
        except Exception:
            for env in envs:
                env.close()
            raise
    try:
        return run_episodes(algo_or_policy, envs, int(n_episodes), deterministic, seed, max_episode_steps)
    finally:
        if owned:
            for env in envs:
                env.close()
