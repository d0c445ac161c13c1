"""Multi-agent vector envs: ``n_envs`` copies of a multi-agent env stepped as arrays.

Two implementations of one interface:

* ``MultiAgentVecEnv``: native MPE scenarios (``simple_spread_v3``,
  ``simple_speaker_listener_v4``) as Cython kernels (ext/mpe.pyx): one ``prange`` over envs,
  per-env random streams, outputs written into buffers allocated once. Same physics, rewards,
  observations and truncation as mpe2, step for step (tests/test_mpe_native.py).
* ``PettingZooVecEnv``: any PettingZoo ``ParallelEnv`` (AEC envs converted with
  ``aec_to_parallel`` where that is valid), one Python env per copy.

Both give, per call, arrays with agents on the second axis, in ``possible_agents`` order:

    venv = MultiAgentVecEnv("spread_v3", n_envs=64, n_agents=3, seed=0)
    out = venv.reset()                 # obs [E, A, obs_dim] float32, state [E, S], alive [E, A]
    out = venv.step(actions)           # actions int64 [E, A] (or float32 [E, A, act_dim]),
                                       # or a dict {agent: [E] / [E, act_dim]}
    out["rewards"], out["terminated"], out["truncated"]      # [E, A]
    out["done"]                        # [E]: the episode ended; the env was reset, and
    out["final_obs"], out["final_state"]                     # hold its last observation
                                       # (PettingZooVecEnv: every env's, before any reset)

Observations narrower than the widest agent's are zero-padded to ``obs_dim`` (an agent's own
width is ``obs_dims[i]``); rows of agents that are not alive are zero. The arrays returned by
``MultiAgentVecEnv`` are its own buffers, overwritten by the next call: copy what you keep.
"""
from __future__ import annotations

import copy
import difflib
import inspect
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np

__all__ = ["MPE_SCENARIOS", "NATIVE_MPE", "MultiAgentVecEnv", "PettingZooVecEnv", "make_multiagent_vec_env",
           "resolve_mpe_name", "mpe_env_names"]

#: mpe2's scenarios (module names); each is also known by its short name without "simple_"
#: ("spread_v3" -> "simple_spread_v3"; "simple_v3" has no shorter one).
MPE_SCENARIOS: tuple[str, ...] = (
    "simple_v3", "simple_adversary_v3", "simple_crypto_v3", "simple_push_v3", "simple_reference_v3",
    "simple_speaker_listener_v4", "simple_spread_v3", "simple_tag_v3", "simple_world_comm_v3",
    "simple_formation_v1", "simple_line_v1", "collect_treasure_v1",
)
#: Scenarios with a native kernel: name -> (kind in ext/mpe.pyx, default agent count,
#: mpe2's default local_ratio or None).
NATIVE_MPE: dict[str, tuple[int, int, float | None]] = {
    "simple_spread_v3": (0, 3, 0.5),
    "simple_speaker_listener_v4": (1, 2, None),
}
_SPEAKER_LISTENER_AGENTS = ("speaker_0", "listener_0")


def mpe_env_names() -> list[str]:
    """Every name ``resolve_mpe_name`` accepts (full and short)."""
    names = list(MPE_SCENARIOS)
    names += [n[len("simple_"):] for n in MPE_SCENARIOS if n.startswith("simple_") and n != "simple_v3"]
    return names


def resolve_mpe_name(name: str) -> str | None:
    """``"spread_v3"``, ``"simple_spread_v3"`` or ``"mpe2.simple_spread_v3"`` ->
    ``"simple_spread_v3"``; None for a name that is not an MPE scenario."""
    if not isinstance(name, str):
        return None
    key = name.strip()
    for prefix in ("mpe2.", "mpe2/", "mpe."):
        if key.startswith(prefix):
            key = key[len(prefix):]
    if key in MPE_SCENARIOS:
        return key
    if f"simple_{key}" in MPE_SCENARIOS:
        return f"simple_{key}"
    return None


def _unknown_env(name: str) -> ValueError:
    registered: list[str] = []
    try:
        from rlox.plugins import ENV_REGISTRY
        registered = list(ENV_REGISTRY.list())
    except ImportError:
        pass
    close = difflib.get_close_matches(name, mpe_env_names() + registered, n=3, cutoff=0.6)
    hint = (f"; did you mean {', '.join(repr(c) for c in close)}?" if close else
            f"; multi-agent envs are the MPE scenarios ({', '.join(mpe_env_names())}), "
            f"ENV_REGISTRY names of PettingZoo envs, ParallelEnv objects or factories")
    return ValueError(f"unknown multi-agent env {name!r}{hint}")


def _agent_count_error(name: str, given: Any, reason: str) -> ValueError:
    return ValueError(f"n_agents={given!r} does not fit {name}: {reason}")


def _check_n_agents(n_agents: Any) -> None:
    if n_agents is None:
        return
    if isinstance(n_agents, bool) or not isinstance(n_agents, (int, np.integer)):
        raise TypeError(f"n_agents must be an int >= 1 or None (the scenario's default), got {n_agents!r}")
    if n_agents < 1:
        raise ValueError(f"n_agents must be >= 1, got {n_agents}")


# ============================================================================ native MPE
class MultiAgentVecEnv:
    """Native vectorised MPE: ``n_envs`` copies of ``env_id`` in one Cython kernel.

    Args:
        env_id: ``"spread_v3"`` / ``"simple_spread_v3"`` or ``"speaker_listener_v4"`` /
            ``"simple_speaker_listener_v4"``.
        n_envs: number of envs; env i draws its episodes from the stream (seed + i).
        n_agents: agents (spread's ``N``, default 3; speaker-listener has exactly 2).
        seed: seed of the first env's stream.
        max_cycles: steps per episode (mpe2's default 25).
        local_ratio: spread's reward mix (default 0.5); speaker-listener takes none.
        continuous_actions: Box(0, 1) actions as mpe2's ``continuous_actions=True``.
    """

    native = True

    def __init__(self, env_id: str = "spread_v3", n_envs: int = 1, n_agents: int | None = None, seed: int = 0, *,
                 max_cycles: int = 25, local_ratio: float | None = None, continuous_actions: bool = False) -> None:
        from rlox._ext.mpe import MPECore

        name = resolve_mpe_name(env_id)
        if name is None:
            raise _unknown_env(str(env_id))
        if name not in NATIVE_MPE:
            raise ValueError(f"{name} has no native kernel; native MPE scenarios are {', '.join(NATIVE_MPE)}. "
                             f"Use PettingZooVecEnv (MAPPO: native=False) for {name}")
        _check_n_agents(n_agents)
        kind, default_n, default_lr = NATIVE_MPE[name]
        if n_agents is None:
            n_agents = default_n
        if name == "simple_speaker_listener_v4" and n_agents != 2:
            raise _agent_count_error(name, n_agents, "it has exactly 2 agents (speaker_0, listener_0)")
        if default_lr is None and local_ratio is not None:
            raise ValueError(f"{name} takes no local_ratio (its reward is shared); got local_ratio={local_ratio!r}")
        if local_ratio is None:
            local_ratio = default_lr if default_lr is not None else 0.0
        if not isinstance(local_ratio, (int, float)) or not 0.0 <= float(local_ratio) <= 1.0:
            raise ValueError(f"local_ratio must be a number in [0, 1], got {local_ratio!r}")
        if isinstance(max_cycles, bool) or not isinstance(max_cycles, (int, np.integer)) or max_cycles < 1:
            raise ValueError(f"max_cycles must be an int >= 1, got {max_cycles!r}")
        self.env_id = name
        self.core = MPECore(kind, n_envs, int(n_agents), seed, int(max_cycles), float(local_ratio),
                            bool(continuous_actions))
        self.n_envs = int(n_envs)
        self.n_agents = int(n_agents)
        self.seed = int(seed)
        self.max_cycles = int(max_cycles)
        self.local_ratio = None if default_lr is None else float(local_ratio)
        self.continuous = bool(continuous_actions)
        self.discrete = not self.continuous
        self.possible_agents = (list(_SPEAKER_LISTENER_AGENTS) if kind == 1
                                else [f"agent_{i}" for i in range(self.n_agents)])
        D, S = self.core.obs_dim, self.core.state_dim
        self.obs_dim, self.state_dim = D, S
        self.obs_dims = [3, 11] if kind == 1 else [D] * self.n_agents
        self.act_dims = list(self.core.n_actions)
        self.act_dim = self.core.act_dim if self.continuous else 1
        self.observation_spaces = {a: gym.spaces.Box(-np.inf, np.inf, (d,), np.float32)
                                   for a, d in zip(self.possible_agents, self.obs_dims)}
        self.action_spaces = {a: (gym.spaces.Box(0.0, 1.0, (k,), np.float32) if self.continuous
                                  else gym.spaces.Discrete(k))
                              for a, k in zip(self.possible_agents, self.act_dims)}
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (S,), np.float32)
        E, A = self.n_envs, self.n_agents
        # Caller-owned output buffers, checked once by the kernel (bind).
        self._obs = np.zeros((E, A, D), np.float32)
        self._state = np.zeros((E, S), np.float32)
        self._rewards = np.zeros((E, A), np.float32)
        self._trunc = np.zeros(E, np.bool_)
        self._final_obs = np.zeros((E, A, D), np.float32)
        self._final_state = np.zeros((E, S), np.float32)
        self.core.bind(self._obs, self._state, self._rewards, self._trunc, self._final_obs, self._final_state)
        self._alive = np.ones((E, A), np.bool_)
        self._terminated = np.zeros((E, A), np.bool_)

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        """Reset every env (re-seeded from ``seed`` when given) -> obs, state, alive."""
        self.core.reset_all(seed)
        return {"obs": self._obs, "state": self._state, "alive": self._alive}

    def observe(self) -> dict[str, np.ndarray]:
        """The current obs / state / alive of every env (after ``set_world``)."""
        self.core.observe()
        return {"obs": self._obs, "state": self._state, "alive": self._alive}

    def step(self, actions: Any) -> dict[str, np.ndarray]:
        """Step every env; see the module docstring for the outputs."""
        # Arrays go straight to the kernel, which checks dtype, shape, range and NaN itself.
        self.core.step(_actions_array(actions, self) if isinstance(actions, Mapping) else actions)
        trunc = np.broadcast_to(self._trunc[:, None], (self.n_envs, self.n_agents))
        return {"obs": self._obs, "state": self._state, "alive": self._alive, "rewards": self._rewards,
                "terminated": self._terminated, "truncated": trunc, "done": self._trunc,
                "final_obs": self._final_obs, "final_state": self._final_state}

    def get_world(self, i: int) -> dict[str, Any]:
        """Env ``i``'s positions, velocities, communication, goal and step count."""
        return self.core.get_world(i)

    def set_world(self, i: int, pos: Any, vel: Any, comm: Any, goal: int = 0, steps: int = 0) -> None:
        """Set env ``i``'s world (see ``get_world``); call ``observe()`` for its observations."""
        self.core.set_world(i, pos, vel, comm, goal, steps)

    def get_state(self) -> dict[str, Any]:
        """Every env's world and random stream, for checkpoints (``set_state`` restores it)."""
        return self.core.get_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.core.set_state(state)
        self.core.observe()

    def close(self) -> None:
        """Nothing to release beyond memory (kept for the PettingZoo interface)."""

    def __repr__(self) -> str:
        return f"MultiAgentVecEnv({self.env_id!r}, n_envs={self.n_envs}, n_agents={self.n_agents})"


def _actions_array(actions: Any, venv: Any) -> np.ndarray:
    """A dict {agent: [E] / [E, k]} or an array -> int64 [E, A] / float32 [E, A, act_dim],
    with missing / extra agents and out-of-range values reported by name."""
    E, A, agents = venv.n_envs, venv.n_agents, venv.possible_agents
    if isinstance(actions, Mapping):
        extra = [a for a in actions if a not in agents]
        missing = [a for a in agents if a not in actions]
        if extra or missing:
            parts = ([f"unknown agent(s) {extra}"] if extra else []) + ([f"no action for {missing}"] if missing else [])
            raise ValueError(f"action dict for {venv.env_id}: {'; '.join(parts)}; expected one entry per agent "
                             f"of {agents}")
        if venv.discrete:
            out = np.empty((E, A), np.int64)
            for j, a in enumerate(agents):
                v = np.asarray(actions[a])
                if v.dtype.kind not in "iu":
                    raise TypeError(f"action for {a!r} must be integers, got dtype {v.dtype}")
                if v.shape not in ((E,), (E, 1)) and not (E == 1 and v.shape == ()):
                    raise ValueError(f"action for {a!r} has shape {v.shape}, expected ({E},)")
                out[:, j] = v.reshape(E)
        else:
            out = np.zeros((E, A, venv.act_dim), np.float32)
            for j, a in enumerate(agents):
                k = venv.act_dims[j]
                v = np.asarray(actions[a], dtype=np.float32)
                if v.shape not in ((E, k),) and not (E == 1 and v.shape == (k,)):
                    raise ValueError(f"action for {a!r} has shape {v.shape}, expected ({E}, {k})")
                out[:, j, :k] = v.reshape(E, k)
        actions = out
    arr = np.asarray(actions)
    if venv.discrete:
        if arr.dtype.kind not in "iu":
            raise TypeError(f"actions for {venv.env_id} must be integers, got dtype {arr.dtype}")
        if arr.shape != (E, A):
            raise ValueError(f"actions have shape {arr.shape}, expected ({E}, {A}) (n_envs, n_agents)")
        for j in range(A):
            col = arr[:, j]
            bad = np.flatnonzero((col < 0) | (col >= venv.act_dims[j]))
            if bad.size:
                raise ValueError(f"action {col[bad[0]]} for {agents[j]!r} (env {bad[0]}) is out of range; "
                                 f"expected an int in [0, {venv.act_dims[j]})")
        return np.ascontiguousarray(arr, dtype=np.int64)
    if arr.shape != (E, A, venv.act_dim):
        raise ValueError(f"actions have shape {arr.shape}, expected ({E}, {A}, {venv.act_dim}) "
                         f"(n_envs, n_agents, act_dim)")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if np.isnan(arr).any():
        raise ValueError(f"actions for {venv.env_id} hold NaN; expected floats in each agent's action space "
                         f"(values outside it are clipped to it)")
    return arr


# ============================================================================ PettingZoo
def _to_parallel(env: Any, label: str) -> Any:
    """A ParallelEnv, converting an AEC env with ``aec_to_parallel`` where that is valid."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if isinstance(env, ParallelEnv) or (hasattr(env, "possible_agents") and callable(getattr(env, "step", None))
                                        and not isinstance(env, AECEnv)):
        return env
    if isinstance(env, AECEnv):
        if not env.metadata.get("is_parallelizable", False):
            raise TypeError(f"{label} is a PettingZoo AEC env that cannot be converted to a parallel env: its "
                            f"metadata does not set 'is_parallelizable' (its agents act in turn and the "
                            f"state changes between them, so stepping all agents at once would change the "
                            f"game). Give a ParallelEnv, or set metadata['is_parallelizable'] = True if "
                            f"its state only changes once per cycle")
        from pettingzoo.utils.conversions import aec_to_parallel
        return aec_to_parallel(env)
    raise TypeError(f"{label} is a {type(env).__name__}, not a PettingZoo env; expected a ParallelEnv (or a "
                    f"parallelizable AEC env), a factory returning one, or an env name such as 'spread_v3'")


class PettingZooVecEnv:
    """``n_envs`` copies of a PettingZoo ``ParallelEnv`` behind the ``MultiAgentVecEnv`` interface.

    Args:
        env_fn: a callable returning a new ParallelEnv (or a parallelizable AEC env) per call.
        n_envs: copies; env i is first reset with ``seed + i``.
        seed: seed of the first env.
        label: the env's name in messages.
    """

    native = False

    def __init__(self, env_fn: Callable[[], Any], n_envs: int = 1, seed: int = 0, label: str = "env") -> None:
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        self.env_id = label
        self.envs = [_to_parallel(env_fn(), label) for _ in range(int(n_envs))]
        self.n_envs = int(n_envs)
        self.seed = int(seed)
        e0 = self.envs[0]
        self.possible_agents = list(e0.possible_agents)
        if not self.possible_agents:
            raise ValueError(f"{label} has no agents (possible_agents is empty)")
        self.n_agents = len(self.possible_agents)
        self.observation_spaces = {a: e0.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: e0.action_space(a) for a in self.possible_agents}
        for a in self.possible_agents:
            o = self.observation_spaces[a]
            if not isinstance(o, gym.spaces.Box):
                raise TypeError(f"{label}: agent {a!r} observes a {type(o).__name__}; MAPPO takes Box "
                                f"observations (flatten others with a PettingZoo wrapper)")
        kinds = {type(s) for s in self.action_spaces.values()}
        if kinds == {gym.spaces.Discrete}:
            self.discrete = True
            self.act_dims = [int(self.action_spaces[a].n) for a in self.possible_agents]
            self.act_dim = 1
        elif kinds == {gym.spaces.Box} and all(len(s.shape) == 1 for s in self.action_spaces.values()):
            self.discrete = False
            self.act_dims = [int(self.action_spaces[a].shape[0]) for a in self.possible_agents]
            self.act_dim = max(self.act_dims)
            # Sampled Gaussian actions are clipped to each agent's bounds before the env steps
            # (as SB3 does for Box actions); the unclipped sample stays what the loss scores.
            self._act_low = [np.asarray(self.action_spaces[a].low, np.float32) for a in self.possible_agents]
            self._act_high = [np.asarray(self.action_spaces[a].high, np.float32) for a in self.possible_agents]
        else:
            spaces = {a: str(s) for a, s in self.action_spaces.items()}
            raise TypeError(f"{label}: action spaces {spaces} are not all Discrete or all 1-D Box; MAPPO "
                            f"takes one of the two")
        self.continuous = not self.discrete
        self.obs_dims = [int(np.prod(self.observation_spaces[a].shape)) for a in self.possible_agents]
        self.obs_dim = max(self.obs_dims)
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        E, A, D = self.n_envs, self.n_agents, self.obs_dim
        self._has_state = self._probe_state(e0)
        self.state_dim = self._state_of(e0, np.zeros((A, D), np.float32)).shape[0] if self._has_state \
            else sum(self.obs_dims)
        self.state_space = gym.spaces.Box(-np.inf, np.inf, (self.state_dim,), np.float32)
        self._obs = np.zeros((E, A, D), np.float32)
        self._state = np.zeros((E, self.state_dim), np.float32)
        self._alive = np.zeros((E, A), np.bool_)
        self._seeded = False

    def _probe_state(self, env: Any) -> bool:
        env.reset(seed=self.seed)
        try:
            s = env.state()
        except (NotImplementedError, AttributeError):
            return False
        return s is not None and np.asarray(s).ndim >= 1

    def _state_of(self, env: Any, obs_rows: np.ndarray) -> np.ndarray:
        if self._has_state:
            return np.asarray(env.state(), dtype=np.float32).reshape(-1)
        return np.concatenate([obs_rows[j, :d] for j, d in enumerate(self.obs_dims)])

    def _write(self, i: int, obs: Mapping[str, Any], env: Any, obs_out: np.ndarray, state_out: np.ndarray) -> None:
        obs_out[i] = 0.0
        for a, o in obs.items():
            j = self._index[a]
            obs_out[i, j, :self.obs_dims[j]] = np.asarray(o, dtype=np.float32).reshape(-1)
        state_out[i] = self._state_of(env, obs_out[i])

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        if seed is not None:
            self.seed, self._seeded = int(seed), False
        for i, env in enumerate(self.envs):
            obs, _ = env.reset(seed=None if self._seeded else self.seed + i)
            self._write(i, obs, env, self._obs, self._state)
            self._alive[i] = [a in env.agents for a in self.possible_agents]
        self._seeded = True
        return {"obs": self._obs, "state": self._state, "alive": self._alive}

    def step(self, actions: Any) -> dict[str, np.ndarray]:
        acts = _actions_array(actions, self)
        E, A, D = self.n_envs, self.n_agents, self.obs_dim
        rewards = np.zeros((E, A), np.float32)
        terminated = np.zeros((E, A), np.bool_)
        truncated = np.zeros((E, A), np.bool_)
        done = np.zeros(E, np.bool_)
        final_obs = np.zeros((E, A, D), np.float32)
        final_state = np.zeros((E, self.state_dim), np.float32)
        for i, env in enumerate(self.envs):
            live = list(env.agents)
            if self.discrete:
                action = {a: int(acts[i, self._index[a]]) for a in live}
            else:
                action = {}
                for a in live:
                    j = self._index[a]
                    action[a] = np.clip(acts[i, j, :self.act_dims[j]], self._act_low[j], self._act_high[j])
            obs, rew, term, trunc, _ = env.step(action)
            for a in live:
                j = self._index[a]
                rewards[i, j] = rew.get(a, 0.0)
                terminated[i, j] = bool(term.get(a, False))
                truncated[i, j] = bool(trunc.get(a, False))
            # final_obs / final_state: what this step returned, before any reset, so an agent
            # truncated alone (its env going on) can be bootstrapped from its last observation too.
            self._write(i, obs, env, final_obs, final_state)
            if not env.agents:
                done[i] = True
                obs, _ = env.reset()
            self._write(i, {a: o for a, o in obs.items() if a in env.agents}, env, self._obs, self._state)
            self._alive[i] = [a in env.agents for a in self.possible_agents]
        return {"obs": self._obs, "state": self._state, "alive": self._alive, "rewards": rewards,
                "terminated": terminated, "truncated": truncated, "done": done, "final_obs": final_obs,
                "final_state": final_state}

    def close(self) -> None:
        for env in self.envs:
            close = getattr(env, "close", None)
            if callable(close):
                close()

    def __repr__(self) -> str:
        return f"PettingZooVecEnv({self.env_id!r}, n_envs={self.n_envs}, n_agents={self.n_agents})"


# ============================================================================ factory
def _mpe_factory(name: str, n_agents: int | None, max_cycles: int, continuous_actions: bool,
                 env_kwargs: Mapping[str, Any]) -> Callable[[], Any]:
    import importlib

    try:
        module = importlib.import_module(f"mpe2.{name}")
    except ImportError as exc:
        raise ImportError(f"{name} needs mpe2 (pip install 'rlox[mpe]'); or use a native scenario "
                          f"({', '.join(NATIVE_MPE)}): {exc}") from exc
    kwargs = dict(env_kwargs)
    kwargs.setdefault("max_cycles", max_cycles)
    kwargs.setdefault("continuous_actions", continuous_actions)
    params = inspect.signature(module.raw_env.__init__).parameters
    unknown = [k for k in kwargs if k not in params]
    if unknown:
        raise TypeError(f"{name} does not take {unknown}; its arguments are "
                        f"{[p for p in params if p not in ('self', 'render_mode')]}")
    if n_agents is not None:
        if "N" in params:
            kwargs["N"] = int(n_agents)
        else:
            probe = module.parallel_env(**kwargs)
            count = len(probe.possible_agents)
            probe.close()
            if count != n_agents:
                raise _agent_count_error(name, n_agents, f"it has {count} agents "
                                         f"({', '.join(probe.possible_agents)}) and no N argument")
    return lambda: module.parallel_env(**kwargs)


def make_multiagent_vec_env(env: Any, n_envs: int = 1, seed: int = 0, *, n_agents: int | None = None,
                            native: bool | None = None, continuous_actions: bool = False,
                            max_cycles: int = 25, env_kwargs: Mapping[str, Any] | None = None) -> Any:
    """A multi-agent vector env for ``env``.

    Args:
        env: an MPE name (``"spread_v3"``, ``"simple_spread_v3"``, ...), an ``ENV_REGISTRY`` name
            of a PettingZoo env factory, a factory (callable returning a ParallelEnv or a
            parallelizable AEC env), or a ParallelEnv / AEC env object (copied ``n_envs`` times).
        n_envs, seed: copies; env i is seeded ``seed + i``.
        n_agents: passed to the scenario (spread's ``N``); a count the env cannot take is a
            ValueError naming both. None: the scenario's default.
        native: True forces the native kernel (a ValueError where there is none), False forces
            PettingZoo, None uses the native kernel where the scenario and arguments allow.
        continuous_actions, max_cycles, env_kwargs: MPE scenario arguments.
    """
    _check_n_agents(n_agents)
    env_kwargs = dict(env_kwargs or {})
    if native not in (None, True, False):
        raise ValueError(f"native must be True, False or None (native where possible), got {native!r}")
    if isinstance(env, str):
        name = resolve_mpe_name(env)
        if name is not None:
            native_ok = name in NATIVE_MPE and not (set(env_kwargs) - {"local_ratio"})
            if native is True and not native_ok:
                why = (f"{name} has no native kernel (native: {', '.join(NATIVE_MPE)})" if name not in NATIVE_MPE
                       else f"the native kernel takes no {sorted(set(env_kwargs) - {'local_ratio'})}")
                raise ValueError(f"native=True but {why}; use native=None or False")
            if native_ok and native is not False:
                return MultiAgentVecEnv(name, n_envs, n_agents, seed, max_cycles=max_cycles,
                                        local_ratio=env_kwargs.get("local_ratio"),
                                        continuous_actions=continuous_actions)
            fn = _mpe_factory(name, n_agents, max_cycles, continuous_actions, env_kwargs)
            return PettingZooVecEnv(fn, n_envs, seed, label=name)
        try:
            from rlox.plugins import ENV_REGISTRY
            factory = ENV_REGISTRY.get(env) if env in ENV_REGISTRY.list() else None
        except ImportError:
            factory = None
        if factory is None:
            raise _unknown_env(env)
        label, fn = env, (lambda: factory(**env_kwargs))
    elif callable(env) and not hasattr(env, "possible_agents"):
        label, fn = getattr(env, "__name__", type(env).__name__), (lambda: env(**env_kwargs))
    elif hasattr(env, "possible_agents"):
        label = getattr(env, "metadata", {}).get("name", type(env).__name__)
        first = [True]

        def fn() -> Any:
            if first[0]:
                first[0] = False
                return env
            return copy.deepcopy(env)
    else:
        raise TypeError(f"env must be an env name such as 'spread_v3', a PettingZoo env or a factory, got "
                        f"{type(env).__name__}")
    if native is True:
        raise ValueError(f"native=True but {label} is not a native MPE scenario ({', '.join(NATIVE_MPE)})")
    venv = PettingZooVecEnv(fn, n_envs, seed, label=label)
    if n_agents is not None and venv.n_agents != n_agents:
        raise _agent_count_error(label, n_agents, f"it has {venv.n_agents} agents ({', '.join(venv.possible_agents)})")
    return venv
