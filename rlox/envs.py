"""Native vectorised classic-control environments and gymnasium adapters.

Native envs (Cython kernels in ``ext/envs_core.pxd``) reproduce gymnasium's ``CartPole-v1``,
``Pendulum-v1``, ``MountainCar-v0``, ``MountainCarContinuous-v0`` and ``Acrobot-v1`` step by
step, time limits included:

    env = rlox.CartPole(seed=42)
    obs = env.reset()                      # [4] float32
    out = env.step(1)                      # dict(obs, reward, terminated, truncated)

    vec = rlox.VecEnv(n=64, seed=0)        # env i behaves exactly like CartPole(seed=0 + i)
    obs = vec.reset_all()                  # [64, 4] float32
    out = vec.step_all([1] * 64)           # obs, rewards, terminated, truncated, terminal_obs

``GymEnv`` / ``GymVecEnv`` give the same interfaces over any gymnasium env; ``make_vec_env``
picks the native ``VecEnv`` when the id is native and ``GymVecEnv`` otherwise.
"""
from __future__ import annotations

import copy

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from rlox._ext import envs as _core

__all__ = [
    "CartPole", "Pendulum", "MountainCar", "MountainCarContinuous", "Acrobot",
    "VecEnv", "GymEnv", "GymVecEnv", "make_vec_env", "is_native", "NATIVE_ENV_IDS", "env_label",
]


def _cartpole_spaces():
    thr = 12 * 2 * math.pi / 360
    high = np.array([2.4 * 2, np.inf, thr * 2, np.inf], dtype=np.float32)
    return spaces.Box(-high, high, dtype=np.float32), spaces.Discrete(2)


def _pendulum_spaces():
    high = np.array([1.0, 1.0, 8], dtype=np.float32)
    return (spaces.Box(low=-high, high=high, dtype=np.float32),
            spaces.Box(low=-2.0, high=2.0, shape=(1,), dtype=np.float32))


def _mountaincar_spaces():
    low = np.array([-1.2, -0.07], dtype=np.float32)
    high = np.array([0.6, 0.07], dtype=np.float32)
    return spaces.Box(low, high, dtype=np.float32), spaces.Discrete(3)


def _mountaincar_cont_spaces():
    low = np.array([-1.2, -0.07], dtype=np.float32)
    high = np.array([0.6, 0.07], dtype=np.float32)
    return (spaces.Box(low=low, high=high, dtype=np.float32),
            spaces.Box(low=-1.0, high=1.0, shape=(1,), dtype=np.float32))


def _acrobot_spaces():
    high = np.array([1.0, 1.0, 1.0, 1.0, 4 * math.pi, 9 * math.pi], dtype=np.float32)
    return spaces.Box(low=-high, high=high, dtype=np.float32), spaces.Discrete(3)


# env id -> (kernel kind, gymnasium time limit, spaces factory)
_NATIVE: dict[str, tuple[int, int, Callable[[], tuple[spaces.Space, spaces.Space]]]] = {
    "CartPole-v1": (_core.KIND_CARTPOLE, 500, _cartpole_spaces),
    "Pendulum-v1": (_core.KIND_PENDULUM, 200, _pendulum_spaces),
    "MountainCar-v0": (_core.KIND_MOUNTAINCAR, 200, _mountaincar_spaces),
    "MountainCarContinuous-v0": (_core.KIND_MOUNTAINCAR_CONT, 999, _mountaincar_cont_spaces),
    "Acrobot-v1": (_core.KIND_ACROBOT, 500, _acrobot_spaces),
}
NATIVE_ENV_IDS: tuple[str, ...] = tuple(_NATIVE)


def is_native(env_id: object) -> bool:
    """True when ``env_id`` names an env rlox steps natively (see ``NATIVE_ENV_IDS``)."""
    return isinstance(env_id, str) and env_id in _NATIVE


def _random_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def _dynamics_flag(dynamics: str) -> bool:
    if dynamics not in ("book", "nips"):
        raise ValueError(f"dynamics must be 'book' or 'nips', got {dynamics!r}")
    return dynamics == "book"


class _Native(_core.NativeEnv):
    env_id: str = ""

    def __init__(self, seed: int | None = None, *, max_episode_steps: int | None = None,
                 g: float = 10.0, book: bool = True):
        kind, limit, make_spaces = _NATIVE[self.env_id]
        super().__init__(kind, _random_seed() if seed is None else seed,
                         limit if max_episode_steps is None else max_episode_steps, g, book)
        self.observation_space, self.action_space = make_spaces()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id})"


class CartPole(_Native):
    """gymnasium's ``CartPole-v1``: obs [4] float32, actions {0, 1}, reward 1, 500-step limit.

    ``state`` is (x, x_dot, theta, theta_dot) in float64 and settable.
    """
    env_id = "CartPole-v1"

    def __init__(self, seed: int | None = None, *, max_episode_steps: int | None = None):
        super().__init__(seed, max_episode_steps=max_episode_steps)


class Pendulum(_Native):
    """gymnasium's ``Pendulum-v1``: obs (cos th, sin th, thdot), torque in [-2, 2], 200 steps.

    ``state`` is (th, thdot); ``g`` is gymnasium's gravity argument.
    """
    env_id = "Pendulum-v1"

    def __init__(self, seed: int | None = None, *, max_episode_steps: int | None = None,
                 g: float = 10.0):
        if not math.isfinite(g):
            raise ValueError(f"g must be finite, got {g}")
        super().__init__(seed, max_episode_steps=max_episode_steps, g=g)


class MountainCar(_Native):
    """gymnasium's ``MountainCar-v0``: obs (position, velocity), actions {0, 1, 2}, 200 steps."""
    env_id = "MountainCar-v0"

    def __init__(self, seed: int | None = None, *, max_episode_steps: int | None = None):
        super().__init__(seed, max_episode_steps=max_episode_steps)


class MountainCarContinuous(_Native):
    """gymnasium's ``MountainCarContinuous-v0``: force in [-1, 1], 999 steps (float32 state
    after the first step, as gymnasium)."""
    env_id = "MountainCarContinuous-v0"

    def __init__(self, seed: int | None = None, *, max_episode_steps: int | None = None):
        super().__init__(seed, max_episode_steps=max_episode_steps)


class Acrobot(_Native):
    """gymnasium's ``Acrobot-v1``: obs [6], torque {-1, 0, +1}, RK4, 500 steps.

    ``dynamics`` is gymnasium's ``book_or_nips`` ("book", its default, or "nips").
    """
    env_id = "Acrobot-v1"

    def __init__(self, seed: int | None = None, *, max_episode_steps: int | None = None,
                 dynamics: str = "book"):
        super().__init__(seed, max_episode_steps=max_episode_steps, book=_dynamics_flag(dynamics))
        self.dynamics = dynamics


class VecEnv(_core.VecCore):
    """``n`` native envs stepped in one Cython call (prange over envs above a size threshold).

    Args:
        n: number of envs (>= 1).
        seed: env i is seeded with ``seed + i`` and behaves exactly like ``Cls(seed=seed + i)``
            under the same actions, automatic resets included, at any thread count.
        env_id: one of ``NATIVE_ENV_IDS``.
        max_episode_steps: time limit (gymnasium's by default).
        reuse_buffers: False (default) returns fresh arrays each call; True returns the same
            arrays every call, overwritten by the next ``step_all`` (no allocation).
        g / dynamics: Pendulum's gravity / Acrobot's "book" or "nips" dynamics.

    ``step_all(actions)`` takes [n] ints (discrete) or [n] / [n, 1] floats (continuous; cast
    to float32 and clipped to the bounds as gymnasium does) and returns a dict:
    ``obs`` [n, obs_dim] float32 (after automatic resets), ``rewards`` [n] float64,
    ``terminated`` [n] bool, ``truncated`` [n] bool (time limit reached) and ``terminal_obs``
    [n, obs_dim] float32: the observation each action led to before any reset (equal to
    ``obs`` except where the env finished).
    """

    def __init__(self, n: int = 1, seed: int | None = 0, env_id: str = "CartPole-v1", *,
                 max_episode_steps: int | None = None, reuse_buffers: bool = False,
                 g: float = 10.0, dynamics: str = "book"):
        if not is_native(env_id):
            raise ValueError(f"env_id {env_id!r} is not native; expected one of "
                             f"{', '.join(NATIVE_ENV_IDS)} (use GymVecEnv or make_vec_env for others)")
        kind, limit, make_spaces = _NATIVE[env_id]
        super().__init__(kind, n, _random_seed() if seed is None else seed,
                         limit if max_episode_steps is None else max_episode_steps,
                         g, _dynamics_flag(dynamics), reuse_buffers)
        self.env_id = env_id
        self.single_observation_space, self.single_action_space = make_spaces()
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)

    def __repr__(self) -> str:
        return f"VecEnv({self.env_id}, n={self.num_envs})"


class GymEnv:
    """The native single-env dict interface over any gymnasium env.

    ``reset()`` -> obs; ``step(action)`` -> dict(obs, reward, terminated, truncated, info).
    The first reset uses ``seed``; later ones continue the env's generator.
    """

    def __init__(self, env: gym.Env, seed: int | None = None):
        if not isinstance(env, gym.Env):
            raise TypeError(f"GymEnv expects a gymnasium.Env, got {type(env).__name__}")
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self._seed = seed
        self._seeded = False

    def reset(self, seed: int | None = None):
        if seed is None and not self._seeded:
            seed = self._seed
        self._seeded = True
        obs, _ = self.env.reset(seed=seed)
        return obs

    def step(self, action) -> dict[str, Any]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return {"obs": obs, "reward": float(reward), "terminated": bool(terminated),
                "truncated": bool(truncated), "info": info}

    def close(self) -> None:
        self.env.close()


def _env_fns(env_id_or_fns, n_envs: int | None, kwargs: dict) -> list[Callable[[], gym.Env]]:
    if isinstance(env_id_or_fns, (list, tuple)):
        fns = list(env_id_or_fns)
        if not fns or not all(callable(f) for f in fns):
            raise TypeError("env_id_or_fns as a list must hold one or more env factories (callables)")
        if n_envs is not None and n_envs != len(fns):
            raise ValueError(f"n_envs = {n_envs} but {len(fns)} env factories were given")
        return fns
    if n_envs is None:
        n_envs = 1
    if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
        raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
    if isinstance(env_id_or_fns, gym.Env):
        if env_id_or_fns.spec is None:
            return _instance_fns(env_id_or_fns, int(n_envs))
        target = env_id_or_fns.spec
    elif isinstance(env_id_or_fns, (str, gym.envs.registration.EnvSpec)):
        target = env_id_or_fns
    elif callable(env_id_or_fns):
        # One factory (``lambda: gym.make(...)``), called once per env, as SB3's make_vec_env takes.
        if kwargs:
            raise ValueError(f"env kwargs {sorted(kwargs)} were given with an env factory; pass them "
                             "to the factory itself (lambda: gym.make(id, **kwargs))")
        return [env_id_or_fns for _ in range(int(n_envs))]
    else:
        raise TypeError("env_id_or_fns must be a gymnasium id, an EnvSpec, a gymnasium env, an env "
                        "factory (a callable returning a gymnasium env) or a list of env factories, "
                        f"got {type(env_id_or_fns).__name__}")
    return [lambda: gym.make(target, **kwargs) for _ in range(int(n_envs))]


def _instance_fns(env: gym.Env, n_envs: int) -> list[Callable[[], gym.Env]]:
    """Factories for an env instance that was never registered (no spec), as SB3 takes one:
    env 0 is the instance itself, envs 1 .. n_envs - 1 are deep copies of it."""
    copies = [env]
    for _ in range(n_envs - 1):
        try:
            copies.append(copy.deepcopy(env))
        except Exception as exc:
            name = type(env.unwrapped).__name__
            raise ValueError(
                f"n_envs = {n_envs} needs {n_envs} copies of the {name} instance, which has no "
                f"gymnasium spec and cannot be deep-copied ({type(exc).__name__}: {exc}); pass "
                f"n_envs=1, a list of {n_envs} factories ([lambda: {name}(...) for _ in "
                f"range({n_envs})]), or register it with gymnasium.register(id=..., "
                f"entry_point=...) and pass the id") from None
    return [lambda e=e: e for e in copies]


class GymVecEnv:
    """The ``VecEnv`` dict interface over gymnasium envs (``SyncVectorEnv``, same-step autoreset).

    Args:
        env_id_or_fns: a gymnasium id, an ``EnvSpec``, a gymnasium env (its spec is used) or a
            list of env factories.
        n_envs: number of envs (the list's length when factories are given).
        seed: env i is reset with ``seed + i`` on the first ``reset_all``.
        asynchronous: step each env in a subprocess of its own (gymnasium's ``AsyncVectorEnv``;
            worth it when one env step costs much more than the inter-process round trip).

    ``step_all`` returns ``obs`` (float32 for float Box spaces), ``rewards`` [n] float64,
    ``terminated`` / ``truncated`` [n] bool and ``terminal_obs``: the final observation where
    an env finished (it was reset in the same call), ``obs`` elsewhere.
    """

    def __init__(self, env_id_or_fns, n_envs: int | None = None, seed: int | None = 0,
                 asynchronous: bool = False, **make_kwargs):
        fns = _env_fns(env_id_or_fns, n_envs, make_kwargs)
        # Dict, Discrete, MultiDiscrete, MultiBinary and Tuple observations are flattened per env
        # into one float vector, keeping their layout (rlox.multi_input).
        from rlox.multi_input import flatten_structured

        raw_fns = list(fns)
        fns = [(lambda f=f: flatten_structured(f())) for f in raw_fns]
        if asynchronous:
            self.envs = gym.vector.AsyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        else:
            self.envs = gym.vector.SyncVectorEnv(fns, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        self.asynchronous = bool(asynchronous)
        if asynchronous:
            # Subprocess envs cannot be asked for an attribute they lack: probe one env here.
            probe = flatten_structured(raw_fns[0]())
            try:
                self.dict_layout = getattr(probe, "layout", None)
                self.obs_layout = getattr(probe, "obs_layout", None)
            finally:
                probe.close()
        else:
            self.dict_layout = getattr(self.envs.envs[0], "layout", None)
            self.obs_layout = getattr(self.envs.envs[0], "obs_layout", None)
        self.num_envs = self.envs.num_envs
        self.seed = seed
        self.single_observation_space = self.envs.single_observation_space
        self.single_action_space = self.envs.single_action_space
        self.observation_space = self.envs.observation_space
        self.action_space = self.envs.action_space
        if asynchronous:
            spec = self.envs.spec
            self.env_id = spec.id if spec is not None else "async"
        else:
            self.env_id = env_label(self.envs.envs[0])
        sp = self.single_observation_space
        self._float_obs = isinstance(sp, spaces.Box) and np.issubdtype(sp.dtype, np.floating)
        self.obs_dim = int(np.prod(sp.shape)) if isinstance(sp, spaces.Box) else None
        self._seeded = False

    def _obs(self, obs):
        return np.asarray(obs, dtype=np.float32) if self._float_obs else obs

    def reset_all(self, seed: int | None = None):
        if seed is None and not self._seeded:
            seed = self.seed
        self._seeded = True
        obs, _ = self.envs.reset(seed=seed)
        return self._obs(obs)

    def _actions(self, actions):
        n, sp = self.num_envs, self.single_action_space
        arr = np.asarray(actions)
        if isinstance(sp, spaces.Discrete):
            if arr.dtype.kind not in "iu":
                raise TypeError(f"actions for {self.env_id} must be integers, got dtype {arr.dtype}")
            arr = arr.reshape(-1) if arr.ndim == 2 and arr.shape[1] == 1 else arr
            if arr.shape != (n,):
                raise ValueError(f"actions has shape {arr.shape}; expected ({n},) for {n} envs")
            bad = np.flatnonzero((arr < sp.start) | (arr >= sp.start + sp.n))
            if bad.size:
                raise ValueError(f"actions[{bad[0]}] = {arr[bad[0]]} is out of range for "
                                 f"{self.env_id}; expected an int in [{sp.start}, {sp.start + sp.n})")
            return arr.astype(np.int64, copy=False)
        if isinstance(sp, spaces.Box):
            arr = arr.astype(sp.dtype, copy=False)
            if arr.shape == (n,) and sp.shape == (1,):
                arr = arr.reshape(n, 1)
            if arr.shape != (n, *sp.shape):
                raise ValueError(f"actions has shape {arr.shape}; expected {(n, *sp.shape)}")
            if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr).any():
                raise ValueError(f"actions for {self.env_id} hold NaN; expected finite floats")
            return arr
        return actions

    def step_all(self, actions) -> dict[str, np.ndarray]:
        obs, rewards, terminated, truncated, info = self.envs.step(self._actions(actions))
        obs = self._obs(obs)
        terminal_obs = obs.copy() if isinstance(obs, np.ndarray) else obs
        mask = info.get("_final_obs")
        if mask is not None and isinstance(obs, np.ndarray):
            for i in np.flatnonzero(mask):
                terminal_obs[i] = info["final_obs"][i]
        return {"obs": obs, "rewards": np.asarray(rewards, dtype=np.float64),
                "terminated": np.asarray(terminated, dtype=bool),
                "truncated": np.asarray(truncated, dtype=bool),
                "terminal_obs": terminal_obs, "info": info}

    def close(self) -> None:
        self.envs.close()

    def __repr__(self) -> str:
        return f"GymVecEnv({self.env_id}, n={self.num_envs}{', async' if self.asynchronous else ''})"


def make_vec_env(env_id, n_envs: int = 1, seed: int | None = 0, *, vec_env: str = "sync", **kwargs):
    """A vector env for ``env_id``, resolved in this order:

    1. a native id (``NATIVE_ENV_IDS``, no gymnasium kwargs): the native ``VecEnv``;
    2. a name in ``rlox.plugins.ENV_REGISTRY``: ``GymVecEnv`` over its factory (a callable
       returning a gymnasium env), or the native ``VecEnv`` when it names a native env class;
    3. an Atari id (``"ALE/Pong-v5"``, ``"PongNoFrameskip-v4"``): ``GymVecEnv`` over
       ``AtariWrapper(make_atari(id))`` (``rlox.wrappers.visual``; needs the ``atari`` extra);
    4. anything gymnasium takes (an id, an ``EnvSpec``, an env object, a list of factories):
       ``GymVecEnv``.

    ``vec_env="async"`` steps Python envs in subprocesses (``GymVecEnv(asynchronous=True)``);
    native envs are compiled and stepped in-process, so it is refused for them.
    """
    if vec_env not in ("sync", "async"):
        raise ValueError(f"vec_env must be 'sync' or 'async', got {vec_env!r}")
    if vec_env == "async":
        native = is_native(env_id) and not kwargs
        if isinstance(env_id, str) and not native and env_id not in gym.registry and ":" not in env_id:
            from rlox.plugins import ENV_REGISTRY

            entry = ENV_REGISTRY.get(env_id) if env_id in ENV_REGISTRY else None
            native = (isinstance(entry, type) and issubclass(entry, _Native)) or \
                callable(getattr(entry, "make_vec_env", None))
            if entry is not None and not native:
                fns = [(lambda e=entry: e(**kwargs)) for _ in range(int(n_envs))]
                venv = GymVecEnv(fns, n_envs, seed, asynchronous=True)
                venv.env_id = env_id
                return venv
        if native:
            raise ValueError(f"vec_env='async' runs Python envs in subprocesses, but {env_id!r} is stepped "
                             f"natively (compiled, all envs in one call); use vec_env='sync'")
        return GymVecEnv(env_id, n_envs, seed, asynchronous=True, **kwargs)
    if is_native(env_id) and not kwargs:
        return VecEnv(n=n_envs, seed=seed, env_id=env_id)
    from rlox.wrappers.visual import is_atari_id

    if is_atari_id(env_id):
        # Atari ids get the standard preprocessing (rlox.wrappers.visual.AtariWrapper).
        from rlox.wrappers.visual import AtariWrapper, make_atari

        fns = [(lambda: AtariWrapper(make_atari(env_id, **kwargs))) for _ in range(int(n_envs))]
        venv = GymVecEnv(fns, n_envs, seed)
        venv.env_id = env_id
        return venv
    if isinstance(env_id, str) and env_id not in gym.registry and ":" not in env_id:
        from rlox.plugins import ENV_REGISTRY

        if env_id in ENV_REGISTRY or not kwargs:
            try:
                entry = ENV_REGISTRY.get(env_id)
            except KeyError:
                raise KeyError(_unknown_env_message(env_id)) from None
            if isinstance(entry, type) and issubclass(entry, _Native):
                return VecEnv(n=n_envs, seed=seed, env_id=entry.env_id)
            own_vec_env = getattr(entry, "make_vec_env", None)     # an entry with a vector env of its own
            if callable(own_vec_env) and not kwargs:               # (e.g. the masked tasks: native VecEnv)
                venv = own_vec_env(int(n_envs), seed)
                venv.env_id = env_id
                return venv
            if not callable(entry):
                raise TypeError(f"ENV_REGISTRY entry {env_id!r} is a {type(entry).__name__}; "
                                f"expected a callable that returns a gymnasium.Env")
            fns = [(lambda e=entry: e(**kwargs)) for _ in range(int(n_envs))]
            venv = GymVecEnv(fns, n_envs, seed)
            venv.env_id = env_id
            return venv
    return GymVecEnv(env_id, n_envs, seed, **kwargs)


def _unknown_env_message(env_id: str) -> str:
    import difflib

    from rlox.plugins import ENV_REGISTRY

    names = sorted(set(gym.registry) | set(ENV_REGISTRY.list()))
    close = difflib.get_close_matches(env_id, names, n=3, cutoff=0.6)
    hint = ("did you mean " + " or ".join(repr(c) for c in close) + "?") if close else \
        "register it with rlox.plugins.ENV_REGISTRY.register(name, factory) or use a gymnasium id"
    return f"unknown env {env_id!r}; {hint}"


def env_label(env) -> str:
    """A string naming ``env`` for checkpoints and messages: the id, a gymnasium env's spec id, or
    the class name of an unregistered env, ``name()`` for a named factory (for a list of factories:
    of the first one, when it is an env class or an env)."""
    if isinstance(env, str):
        return env
    if isinstance(env, (list, tuple)) and env:
        first = env[0]
        if isinstance(first, type) or isinstance(first, gym.Env):
            return env_label(first) if isinstance(first, gym.Env) else first.__name__
        return "custom env (list of factories)"
    if isinstance(env, type):
        return env.__name__
    if callable(env) and not hasattr(env, "reset"):
        name = getattr(env, "__name__", "")      # a factory: named in messages, not by its type
        return f"{name}()" if name.isidentifier() else "the env factory"
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return spec.id
    return type(getattr(env, "unwrapped", env)).__name__
