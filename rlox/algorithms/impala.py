"""IMPALA: Importance Weighted Actor-Learner Architecture with V-trace (Espeholt et al., 2018,
arXiv:1802.01561).

Reading order: config -> networks -> actors (collection) -> backends -> V-trace targets -> update.

* config: ``rlox.config.IMPALAConfig``.
* networks: the ``rlox.policies`` actor-critic (the learner's on ``device``; each actor keeps a
  CPU copy, the behaviour policy mu).
* actors: ``n_actors`` actors each step ``envs_per_actor`` envs (the native ``VecEnv`` where the
  env is native, gymnasium vector envs otherwise) with their copy of the weights and send
  trajectories of ``unroll_length`` steps: observations ``[T+1, E, *obs]``, actions, behaviour
  log-probabilities log mu(a|x), rewards and dones, stamped with the policy version they were
  collected with.
* backends (``backend=``): ``"local"`` actor processes on this machine writing into shared-memory
  trajectory slots (no array is pickled; at most one process per core unless ``n_workers`` says
  otherwise, actors shared out over them); ``"thread"`` runs the actors in the learner's own
  thread, one after another (tiny runs, debugging, deterministic); ``"ray"`` makes each actor a
  Ray actor (``ray_address`` joins a cluster). Dead or silent actors are restarted (counted in
  ``actors/restarts``): an actor is silent once it has delivered nothing for ``actor_timeout``
  wall seconds since it last delivered or was handed work (``_Deadlines``, both backends).
* targets: V-trace (paper eq. 1) over the ``[T, B]`` batch in one ``compute_vtrace_batched``
  call (Cython, prange over the B trajectories), with log rho = log pi(a|x) - log mu(a|x).
* update: one gradient step per batch on pg loss ``-rho_t A_t log pi`` (A_t from V-trace),
  baseline loss ``0.5 (v_s - V)^2`` (``vf_coef``) and an entropy bonus (``ent_coef``); Adam or
  RMSProp; the new weights go to the actors with the next version number. The lag of each
  trajectory (learner version - behaviour version) is logged as ``actors/staleness``.

    impala = IMPALA("CartPole-v1", n_actors=8, seed=0)
    metrics = impala.train(total_timesteps=200_000)
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import traceback
import warnings
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlox.advantages import compute_vtrace_batched
from rlox.algorithms.base import Algorithm, adam
from rlox.algorithms.on_policy import OnPolicyAlgorithm
from rlox.config import IMPALAConfig
from rlox.envs import env_label, make_vec_env
from rlox.errors import RloxWarning
from rlox.losses import explained_variance
from rlox.policies import make_policy

__all__ = ["IMPALA", "ActorRestartWarning", "impala_loss"]


class ActorRestartWarning(RloxWarning):
    """An actor died or fell silent and was restarted (training goes on)."""


# ====================================================================== networks
def _build_policy(spec: Mapping[str, Any]) -> nn.Module:
    """The actor-critic for ``spec`` (spaces + network fields), initialised from ``spec['seed']``
    without touching torch's global generator. Learner and actors build the same one."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        return make_policy(spec["observation_space"], spec["action_space"], algorithm="IMPALA",
                           hidden=spec["hidden"], activation=spec["activation"], ortho_init=spec["ortho_init"],
                           log_std_init=spec["log_std_init"])


def _flat_params(policy: nn.Module) -> np.ndarray:
    return torch.nn.utils.parameters_to_vector(policy.parameters()).detach().cpu().numpy().astype(np.float32)


def _load_flat(policy: nn.Module, flat: np.ndarray) -> None:
    torch.nn.utils.vector_to_parameters(torch.from_numpy(np.array(flat, dtype=np.float32)), policy.parameters())


def _layout(spec: Mapping[str, Any]) -> dict[str, tuple[tuple[int, ...], Any]]:
    """Name -> (shape, dtype) of one actor trajectory (T = unroll_length, E = envs_per_actor)."""
    T, E = spec["unroll_length"], spec["envs_per_actor"]
    obs_shape = tuple(spec["observation_space"].shape)
    space = spec["action_space"]
    discrete = isinstance(space, gym.spaces.Discrete)
    return {
        "obs": ((T + 1, E, *obs_shape), np.float32),             # x_0 .. x_T (x_T: the bootstrap state)
        "actions": ((T, E) if discrete else (T, E, *space.shape), np.int64 if discrete else np.float32),
        "behaviour_log_probs": ((T, E), np.float32),             # log mu(a_t | x_t)
        "rewards": ((T, E), np.float32),
        "dones": ((T, E), np.float32),
    }


# ====================================================================== actors (collection)
class _Actor:
    """One actor: ``envs_per_actor`` envs and the episode bookkeeping. Its behaviour policy is
    the (CPU) module passed to ``unroll``; sampling uses the actor's own generator."""

    def __init__(self, actor_id: int, spec: Mapping[str, Any], restart: int = 0) -> None:
        self.actor_id = actor_id
        self.n_envs = spec["envs_per_actor"]
        self.gamma = spec["gamma"]
        # Env seeds: distinct per actor and per restart, reproducible from the run's seed.
        env_seed = spec["seed"] + 10_007 * (actor_id + 1) + 1_000_003 * restart
        self.env = make_vec_env(spec["env"], self.n_envs, env_seed)
        self.generator = torch.Generator().manual_seed(env_seed)
        space = spec["action_space"]
        self.discrete = isinstance(space, gym.spaces.Discrete)
        if not self.discrete:
            self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
        self.obs_shape = tuple(spec["observation_space"].shape)
        self.obs = self.env.reset_all().reshape(self.n_envs, *self.obs_shape).astype(np.float32)
        self.ep_ret = np.zeros(self.n_envs)
        self.ep_len = np.zeros(self.n_envs, dtype=np.int64)

    def unroll(self, policy: nn.Module, out: Mapping[str, np.ndarray]) -> tuple[list[float], list[int]]:
        """Fill ``out`` (arrays shaped as ``_layout`` says) with one trajectory; return the
        returns and lengths of the episodes that finished in it."""
        T = out["rewards"].shape[0]
        returns: list[float] = []
        lengths: list[int] = []
        obs = self.obs
        with torch.inference_mode():
            for t in range(T):
                out["obs"][t] = obs
                flat = torch.from_numpy(obs).reshape(self.n_envs, -1)      # the policy sees flat observations
                actions, log_probs, _ = policy.act(flat, False, self.generator, with_value=False)
                a = actions.numpy()
                out["actions"][t] = a.reshape(out["actions"].shape[1:])
                out["behaviour_log_probs"][t] = log_probs.numpy()
                step = self.env.step_all(a if self.discrete else np.clip(a, self.low, self.high))
                rewards = np.asarray(step["rewards"], dtype=np.float64)
                terminated, truncated = step["terminated"], step["truncated"]
                self.ep_ret += step.get("raw_rewards", rewards)
                self.ep_len += 1
                done = terminated | truncated
                if done.any():
                    # A time-limit cut is not a terminal state: fold gamma * V(final obs) into the
                    # reward (the collectors' truncation bootstrap; here with the actor's critic).
                    cut = np.flatnonzero(truncated & ~terminated)
                    if cut.size:
                        final = step["terminal_obs"].reshape(self.n_envs, *self.obs_shape)[cut]
                        v_final = policy.get_value(torch.from_numpy(np.ascontiguousarray(final, np.float32))
                                                   .reshape(cut.size, -1))
                        rewards = rewards.copy()
                        rewards[cut] += self.gamma * v_final.numpy()
                    ended = np.flatnonzero(done)
                    returns += self.ep_ret[ended].tolist()
                    lengths += self.ep_len[ended].tolist()
                    self.ep_ret[ended] = 0.0
                    self.ep_len[ended] = 0
                out["rewards"][t] = rewards
                out["dones"][t] = done
                obs = step["obs"].reshape(self.n_envs, *self.obs_shape).astype(np.float32, copy=False)
        out["obs"][T] = obs
        self.obs = obs
        return returns, lengths

    def close(self) -> None:
        self.env.close()


def _build_actors(actor_ids: Sequence[int], spec: Mapping[str, Any], restart: int) -> list[_Actor]:
    """The actors, or a RuntimeError naming the env and carrying the traceback."""
    try:
        return [_Actor(a, spec, restart) for a in actor_ids]
    except Exception:
        raise RuntimeError(f"IMPALA actor(s) {list(actor_ids)} could not build env {spec['env_label']!r}:\n"
                           f"{traceback.format_exc()}") from None


# ====================================================================== backends
class _Deadlines:
    """Per-actor wall-clock deadlines, shared by the local and Ray backends.

    An actor is silent when it has delivered nothing for ``timeout`` wall seconds since it last
    delivered or was handed work (a free slot, a new unroll request) and has nothing waiting for
    the learner now (the backend checks that before it restarts one: ``expired`` only names the
    candidates). A healthy actor is never kept waiting that long by the learner: work is handed
    back as soon as a trajectory is copied out, and one finished while the learner learns waits
    in the pipe / object store, ready. (Counting only the learner's waiting time, as both
    backends once did, let a hung actor go unnoticed while the others kept the learner busy.)

    A (re)started actor's first delivery includes its start-up: ``started`` grants
    ``max(timeout, STARTUP)``. With ``sibling_grace`` (local backend: actor processes forked by one
    fork server, whose start-up is the slow part), once any actor has delivered, the others still
    starting get ``max(timeout, sibling_grace)`` from then on.
    """

    STARTUP = 120.0

    def __init__(self, timeout: float, sibling_grace: float | None = None) -> None:
        self.timeout, self.sibling_grace = timeout, sibling_grace
        self.due: dict[Any, float] = {}
        self.starting: set[Any] = set()

    def started(self, key: Any) -> None:
        self.due[key] = time.monotonic() + max(self.timeout, self.STARTUP)
        self.starting.add(key)

    def delivered(self, key: Any) -> None:
        now = time.monotonic()
        self.due[key] = now + self.timeout
        if key in self.starting:
            self.starting.discard(key)
            if self.sibling_grace is not None:
                for other in self.starting:
                    self.due[other] = min(self.due[other], now + max(self.timeout, self.sibling_grace))

    def handed_work(self, key: Any) -> None:
        self.due[key] = max(self.due.get(key, -np.inf), time.monotonic() + self.timeout)

    def expired(self) -> list[Any]:
        """The actors past their deadline (restart those with nothing waiting)."""
        now = time.monotonic()
        return [key for key, due in self.due.items() if now > due]

    def wait_time(self) -> float:
        """How long the learner may block waiting for trajectories before it must check deadlines."""
        soonest = min(self.due.values(), default=np.inf) - time.monotonic()
        return float(min(self.timeout, max(soonest, 0.0) + 0.01))


class _ThreadBackend:
    """Actors in the learner's thread, stepped one after another (deterministic, no processes)."""

    restarts = 0

    def __init__(self, spec: Mapping[str, Any], n_actors: int, timeout: float, max_restarts: int) -> None:
        self.spec = spec
        self.actors = _build_actors(range(n_actors), spec, 0)
        self.policy = _build_policy(spec)
        self.version = 0
        self.next = 0
        self.layout = _layout(spec)
        self.buf = {k: np.empty(shape, dtype) for k, (shape, dtype) in self.layout.items()}

    def publish(self, flat: np.ndarray, version: int) -> None:
        _load_flat(self.policy, flat)
        self.version = version

    def trajectories(self, k: int):
        for _ in range(k):
            actor = self.actors[self.next % len(self.actors)]
            self.next += 1
            rets, lens = actor.unroll(self.policy, self.buf)
            yield self.buf, actor.actor_id, self.version, rets, lens

    def close(self) -> None:
        for a in self.actors:
            a.close()


# ---------------------------------------------------------------------- local (processes + shared memory)
_HEADER = 2   # int64 words ahead of the weights: [sequence (odd while the learner writes), version]


def _read_weights(header: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, int] | None:
    """A consistent copy of the shared weights (seqlock: retry while the learner writes; no lock
    an actor could die holding), or None when the learner is mid-write for too long."""
    for _ in range(10_000):
        seq = int(header[0])
        if seq % 2 == 0:
            flat, version = weights.copy(), int(header[1])
            if int(header[0]) == seq:
                return flat, version
        time.sleep(0.0001)
    return None


def _local_worker(conn: Any, spec: Mapping[str, Any], actor_ids: list[int], restart: int, weights_name: str,
                  n_params: int, slots_name: str, slot_ids: list[int]) -> None:
    """An actor process: waits for free slots, fills each with its next actor's trajectory."""
    from multiprocessing import shared_memory

    torch.set_num_threads(1)
    wshm = sshm = None
    try:
        try:
            actors = _build_actors(actor_ids, spec, restart)
        except RuntimeError as exc:
            conn.send(("error", str(exc)))
            return
        policy = _build_policy(spec)
        wshm = shared_memory.SharedMemory(name=weights_name)
        header = np.ndarray((_HEADER,), np.int64, wshm.buf)
        weights = np.ndarray((n_params,), np.float32, wshm.buf, offset=_HEADER * 8)
        sshm = shared_memory.SharedMemory(name=slots_name)
        views = _slot_views(sshm.buf, _layout(spec), max(slot_ids) + 1)
        free = list(slot_ids)
        version, k = -1, 0
        conn.send(("ready",))
        while True:
            while not free or conn.poll():
                msg = conn.recv()
                if msg[0] == "stop":
                    return
                free.append(msg[1])
            if int(header[1]) != version:
                got = _read_weights(header, weights)
                if got is not None:
                    _load_flat(policy, got[0])
                    version = got[1]
            slot = free.pop(0)
            actor = actors[k % len(actors)]
            k += 1
            rets, lens = actor.unroll(policy, views[slot])
            conn.send(("traj", slot, actor.actor_id, version, rets, lens))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        return
    except Exception:
        try:
            conn.send(("crash", traceback.format_exc()))
        except (OSError, ValueError):
            pass
    finally:
        for shm in (wshm, sshm):
            if shm is not None:
                shm.close()


@contextlib.contextmanager
def _without_main_import():
    """Actor processes import rlox and the env, not the user's script: a script without
    an ``if __name__ == "__main__":`` guard would otherwise run again inside every actor."""
    from multiprocessing import spawn

    original = spawn.get_preparation_data

    def preparation_data(name: str) -> dict:
        data = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    spawn.get_preparation_data = preparation_data
    try:
        yield
    finally:
        spawn.get_preparation_data = original


def _slot_views(buf: Any, layout: Mapping[str, tuple], n_slots: int) -> list[dict[str, np.ndarray]]:
    """NumPy views of ``n_slots`` trajectory slots laid out one after another in ``buf``."""
    views, offset = [], 0
    for _ in range(n_slots):
        slot = {}
        for name, (shape, dtype) in layout.items():
            arr = np.ndarray(shape, dtype, buf, offset=offset)
            slot[name] = arr
            offset += arr.nbytes
        views.append(slot)
    return views


def _slot_bytes(layout: Mapping[str, tuple]) -> int:
    return sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in layout.values())


class _LocalBackend:
    """Actor processes (forked by a fork server) on this machine; trajectories travel through shared-memory
    slots (two per process, so an actor fills one while the learner reads the other) and only
    slot numbers and episode returns go through the pipes."""

    SLOTS_PER_WORKER = 2

    def __init__(self, spec: Mapping[str, Any], n_actors: int, n_workers: int, timeout: float,
                 max_restarts: int, n_params: int) -> None:
        import multiprocessing as mp
        from multiprocessing import shared_memory

        # forkserver: fork is unsafe once the learner has run OpenMP or torch threads; the fork
        # server (started once per Python process, with rlox and torch imported) forks clean
        # actor processes in milliseconds, where spawn would import torch in every one.
        self.ctx = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(["rlox.algorithms.impala"])
        self.spec, self.timeout, self.max_restarts = spec, timeout, max_restarts
        self.restarts = 0
        self.n_params = n_params
        self.layout = _layout(spec)
        n_workers = max(1, min(n_workers, n_actors))
        self.wshm = shared_memory.SharedMemory(create=True, size=(_HEADER + n_params) * 8)
        self.header = np.ndarray((_HEADER,), np.int64, self.wshm.buf)
        self.header[:] = 0
        self.weights = np.ndarray((n_params,), np.float32, self.wshm.buf, offset=_HEADER * 8)
        n_slots = n_workers * self.SLOTS_PER_WORKER
        self.sshm = shared_memory.SharedMemory(create=True, size=max(1, n_slots * _slot_bytes(self.layout)))
        self.views = _slot_views(self.sshm.buf, self.layout, n_slots)
        # Worker w runs actors w, w + n_workers, ...; slots [2w, 2w + 1] are its own.
        self.workers = [{"actors": list(range(w, n_actors, n_workers)),
                         "slots": list(range(w * self.SLOTS_PER_WORKER, (w + 1) * self.SLOTS_PER_WORKER)),
                         "generation": 0, "proc": None, "conn": None, "index": w} for w in range(n_workers)]
        # The fork server's start-up (it imports torch) is the slow part of a worker's start: once
        # one worker has delivered, a sibling still starting needs seconds, not the start-up grace.
        self.deadlines = _Deadlines(timeout, sibling_grace=10.0)
        self.closed = False

    def _spawn(self, w: dict) -> None:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_local_worker, daemon=True, name=f"rlox-impala-actor-{w['actors'][0]}",
                                args=(child, self.spec, w["actors"], w["generation"], self.wshm.name,
                                      self.n_params, self.sshm.name, w["slots"]))
        with _without_main_import():
            proc.start()
        child.close()
        w["proc"], w["conn"] = proc, parent
        self.deadlines.started(w["index"])       # start-up gets a longer deadline than an unroll

    def _stop(self, w: dict, kill: bool = False) -> None:
        proc, conn = w["proc"], w["conn"]
        if conn is not None:
            try:
                if not kill:
                    conn.send(("stop",))
            except (OSError, ValueError):
                pass
        if proc is not None:
            proc.join(timeout=0 if kill else 2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5.0)
        if conn is not None:
            conn.close()
        w["proc"] = w["conn"] = None

    def start(self) -> None:
        for w in self.workers:
            self._spawn(w)

    def _restart(self, w: dict, why: str) -> None:
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise RuntimeError(f"IMPALA actors were restarted {self.restarts - 1} times in this train() call, more "
                               f"than max_actor_restarts={self.max_restarts}; last failure: {why}")
        warnings.warn(f"IMPALA actor process for actors {w['actors']} restarted ({why})", ActorRestartWarning,
                      stacklevel=4)
        self._stop(w, kill=True)
        w["generation"] += 1
        self._spawn(w)

    def publish(self, flat: np.ndarray, version: int) -> None:
        self.header[0] += 1          # odd: writing
        self.weights[:] = flat
        self.header[1] = version
        self.header[0] += 1          # even: consistent

    def trajectories(self, k: int):
        from multiprocessing.connection import wait

        # Wall-clock deadlines per worker (``_Deadlines``): reset when it delivers and when it
        # gets a slot back; a silent worker is one past its deadline with an empty pipe.
        got = 0
        while got < k:
            by_conn = {id(w["conn"]): w for w in self.workers}
            ready = wait([w["conn"] for w in self.workers], timeout=self.deadlines.wait_time())
            for i in self.deadlines.expired():
                w = self.workers[i]
                if w["conn"] not in ready:
                    self._restart(w, f"no trajectory for {self.timeout:g} s")
            for conn in ready:
                w = by_conn[id(conn)]
                if w["conn"] is not conn:
                    continue                      # restarted above
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    code = w["proc"].exitcode if w["proc"] is not None else None
                    self._restart(w, f"process exited with code {code}")
                    continue
                self.deadlines.delivered(w["index"])
                if msg[0] == "error":           # the env cannot be built: restarting will not help
                    raise RuntimeError(msg[1])
                if msg[0] == "crash":
                    self._restart(w, "exception in the actor:\n" + msg[1])
                    continue
                if msg[0] != "traj":
                    continue
                _, slot, actor_id, version, rets, lens = msg
                yield self.views[slot], actor_id, version, rets, lens   # the learner copies it out
                try:
                    conn.send(("slot", slot))   # the slot is free again
                except (OSError, ValueError):
                    pass                        # the actor died: its deadline restarts it
                if w["conn"] is conn:
                    self.deadlines.handed_work(w["index"])
                got += 1
                if got >= k:
                    return

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for w in self.workers:
            self._stop(w)
        self.views = []
        for shm in (self.wshm, self.sshm):
            shm.close()
            shm.unlink()


# ---------------------------------------------------------------------- Ray
def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("IMPALA(backend='ray') needs Ray: pip install 'rlox[distributed]' (or pip install "
                          "'ray[default]'); backend='local' needs nothing more") from None
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """A clear, bounded-time error when ``host:port`` does not answer (ray.init would retry long)."""
    host, sep, port = address.rpartition(":")
    if address.startswith("ray://") or not sep or not port.isdigit():
        return
    host = host.replace("[", "").replace("]", "") or "127.0.0.1"
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConnectionError(f"cannot reach the Ray cluster at ray_address={address!r} ({exc}); start one with "
                              f"`ray start --head --port={port}` on that machine, pass ray_address='auto' on a "
                              f"cluster node, or None for a local Ray instance") from None


class _RayBackend:
    """Each actor is a Ray actor; the learner keeps one unroll in flight per actor, gathers
    with ``ray.wait`` and puts the weights in the object store once per update."""

    def __init__(self, spec: Mapping[str, Any], n_actors: int, timeout: float, max_restarts: int,
                 address: str | None, actor_cpus: float | None) -> None:
        ray = self.ray = _import_ray()
        if not ray.is_initialized():
            if address not in (None, "auto", "local"):
                _check_reachable(address)
            try:
                ray.init(address=address, include_dashboard=False, ignore_reinit_error=True,
                         log_to_driver=False, **({} if address else {"num_cpus": os.cpu_count() or 1}))
            except ConnectionError as exc:
                raise ConnectionError(f"cannot join the Ray cluster at ray_address={address!r}: {exc}; start one "
                                      f"with `ray start --head` or pass ray_address=None") from None
        if actor_cpus is None:
            actor_cpus = min(1.0, float(ray.cluster_resources().get("CPU", 1.0)) / n_actors)
        self.spec, self.timeout, self.max_restarts = spec, timeout, max_restarts
        self.restarts = 0
        self.remote_cls = ray.remote(num_cpus=actor_cpus, scheduling_strategy="SPREAD")(_RayActor)
        self.actors: list[Any] = [None] * n_actors
        self.generation = [0] * n_actors
        self.pending: dict[Any, int] = {}
        self.weights_ref: Any = None
        self.version = 0
        self.n_actors = n_actors
        self.deadlines = _Deadlines(timeout)        # per actor, in wall time
        self.nodes: list[str] = []

    def _create(self, i: int) -> None:
        self.actors[i] = self.remote_cls.remote(i, self.spec, self.generation[i])

    def start(self) -> None:
        for i in range(self.n_actors):
            self._create(i)
        ray = self.ray
        try:   # construction errors (the env cannot be built) surface here, once
            self.nodes = ray.get([a.node_id.remote() for a in self.actors], timeout=max(self.timeout, 60.0))
        except ray.exceptions.RayActorError as exc:
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))      # Ray colours its tracebacks
            raise RuntimeError(f"IMPALA Ray actor failed to start: {text}") from None
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(f"IMPALA Ray actors did not start within {max(self.timeout, 60.0):g} s; the cluster "
                               f"may lack CPUs for {self.n_actors} actors (set ray_actor_cpus lower)") from None

    def publish(self, flat: np.ndarray, version: int) -> None:
        self.weights_ref = self.ray.put(flat)     # once per update, shared by every actor
        self.version = version

    def _submit(self, i: int, started: bool = False) -> None:
        self.pending[self.actors[i].unroll.remote(self.weights_ref, self.version)] = i
        if started:     # a re-created actor's first unroll includes its start (imports, env build)
            self.deadlines.started(i)
        else:
            self.deadlines.handed_work(i)

    def _restart(self, i: int, why: str) -> None:
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise RuntimeError(f"IMPALA actors were restarted {self.restarts - 1} times in this train() call, more "
                               f"than max_actor_restarts={self.max_restarts}; last failure: {why}")
        warnings.warn(f"IMPALA Ray actor {i} restarted ({why})", ActorRestartWarning, stacklevel=4)
        for ref, j in list(self.pending.items()):
            if j == i:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref)
                del self.pending[ref]
        with contextlib.suppress(Exception):   # already gone; a hung one is killed (its process ends)
            self.ray.kill(self.actors[i], no_restart=True)
        self.generation[i] += 1
        self._create(i)
        self._submit(i, started=True)

    def trajectories(self, k: int):
        ray = self.ray
        in_flight = set(self.pending.values())
        for i in range(self.n_actors):
            if i not in in_flight:     # the first call (start() waited for the actors to be built)
                self._submit(i)
        # Wall-clock deadlines per actor (``_Deadlines``): reset when it delivers and when it is
        # sent its next unroll; a hung actor is one past its deadline whose unroll is not done.
        got = 0
        while got < k:
            ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=self.deadlines.wait_time())
            expired = set(self.deadlines.expired())
            late = {ref: i for ref, i in self.pending.items() if i in expired}
            if late:
                # Done but not picked by wait(num_returns=1) is not late (fetch_local=False: an
                # object still on another node counts as done).
                done, _ = ray.wait(list(late), num_returns=len(late), timeout=0, fetch_local=False)
                for ref, i in late.items():
                    if ref not in done and ref not in ready:
                        self._restart(i, f"no trajectory for {self.timeout:g} s")
            if not ready or ready[0] not in self.pending:
                continue
            ref = ready[0]
            i = self.pending.pop(ref)
            try:
                traj, version, rets, lens = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
                self._restart(i, f"{type(exc).__name__}: {str(exc)[:2000]}")
                continue
            self.deadlines.delivered(i)
            self._submit(i)             # its next unroll runs while the learner works
            got += 1
            yield traj, i, version, rets, lens

    def close(self) -> None:
        for ref in list(self.pending):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref)
        self.pending.clear()
        for a in self.actors:
            if a is not None:
                try:
                    self.ray.kill(a)
                except Exception:
                    pass
        self.actors = [None] * self.n_actors


class _RayActor:
    """The Ray actor class body (decorated by ``_RayBackend``): one ``_Actor`` and its policy."""

    def __init__(self, actor_id: int, spec: Mapping[str, Any], restart: int) -> None:
        torch.set_num_threads(1)
        self.actor = _build_actors([actor_id], spec, restart)[0]
        self.policy = _build_policy(spec)
        self.layout = _layout(spec)
        self.version = -1

    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def pid(self) -> int:
        return os.getpid()

    def unroll(self, flat: np.ndarray, version: int) -> tuple[dict[str, np.ndarray], int, list, list]:
        if version != self.version:
            _load_flat(self.policy, flat)
            self.version = version
        out = {k: np.empty(shape, dtype) for k, (shape, dtype) in self.layout.items()}
        rets, lens = self.actor.unroll(self.policy, out)
        return out, self.version, rets, lens


# ====================================================================== V-trace targets + update
def impala_loss(policy: nn.Module, batch: Mapping[str, torch.Tensor], *, gamma: float, rho_bar: float,
                c_bar: float, vf_coef: float, ent_coef: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The IMPALA loss on a time-major batch (Espeholt et al. 2018, section 4).

    batch: ``obs`` [T+1, B, *obs], ``actions`` [T, B] (or [T, B, act_dim]), ``behaviour_log_probs``,
    ``rewards``, ``dones`` [T, B]. Returns (loss, terms) with the terms ``policy_loss``,
    ``value_loss``, ``entropy`` and detached diagnostics (``rho_mean``, ``clip_fraction``,
    ``explained_variance``).
    """
    obs, actions = batch["obs"], batch["actions"]
    T, B = actions.shape[:2]
    flat_obs = obs.reshape((T + 1) * B, -1)
    values_all = policy.get_value(flat_obs).reshape(T + 1, B)
    flat_actions = actions.reshape(T * B, *actions.shape[2:])
    log_probs, entropy, _ = policy.evaluate_actions(flat_obs[:T * B], flat_actions, with_value=False)
    log_probs, entropy = log_probs.reshape(T, B), entropy.reshape(T, B)
    values = values_all[:T]
    log_rhos = (log_probs - batch["behaviour_log_probs"]).detach()
    # V-trace targets v_s and pg advantages rho_s (r_s + gamma v_{s+1} - V(x_s)), paper eq. 1 and
    # section 4.2, for all B trajectories in one Cython call (prange over columns).
    vs, pg_adv = compute_vtrace_batched(
        log_rhos.cpu().numpy(), batch["rewards"].cpu().numpy(), values.detach().cpu().numpy(),
        batch["dones"].cpu().numpy(), values_all[T].detach().cpu().numpy(), gamma, rho_bar, c_bar)
    vs = torch.from_numpy(vs).to(values.device)
    pg_adv = torch.from_numpy(pg_adv).to(values.device)
    policy_loss = -(pg_adv * log_probs).mean()
    value_loss = 0.5 * ((vs - values) ** 2).mean()
    ent = entropy.mean()
    loss = policy_loss + vf_coef * value_loss - ent_coef * ent
    rhos = log_rhos.exp()
    terms = {"policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(), "entropy": ent.detach(),
             "rho_mean": rhos.mean(), "clip_fraction": (rhos > rho_bar).float().mean(),
             "explained_variance": explained_variance(values.detach().reshape(-1), vs.reshape(-1))}
    return loss, terms


class IMPALA(Algorithm):
    """IMPALA with V-trace: actors (processes, threads or Ray actors) collect, the learner learns.

    Args:
        env_id: a gymnasium id, an ``ENV_REGISTRY`` name, or a gymnasium env object (actors
            rebuild it from its spec).
        seed, callbacks, logger, device: see ``Algorithm``.
        **config: ``IMPALAConfig`` fields (``n_actors``, ``backend``, ``unroll_length``, ...).

    Actors start when ``train`` starts and stop when it returns; ``save``/``load`` keep the
    learner (weights, optimiser, policy version, counters), and actors rebuild from it.
    """

    name = "impala"
    config_class = IMPALAConfig

    def __init__(self, env_id: Any = "CartPole-v1", *, seed: int = 0, callbacks: Sequence[Any] | None = None,
                 logger: Any = None, device: str | torch.device = "cpu", **config: Any) -> None:
        super().__init__(env_id, seed=seed, callbacks=callbacks, logger=logger, device=device, **config)
        cfg = self.config
        probe = make_vec_env(env_id, 1, self.seed)   # the spaces (and an early error for a bad id)
        self._obs_space, self._act_space = probe.single_observation_space, probe.single_action_space
        probe.close()
        # What actors need to rebuild env and policy: plain, picklable values.
        self.spec = {"env": env_id if isinstance(env_id, str) else getattr(env_id, "spec", None) or env_id,
                     "env_label": env_label(env_id), "seed": self.seed, "gamma": cfg.gamma,
                     "observation_space": self._obs_space, "action_space": self._act_space,
                     "envs_per_actor": cfg.envs_per_actor, "unroll_length": cfg.unroll_length,
                     "hidden": cfg.hidden, "activation": cfg.activation, "ortho_init": cfg.ortho_init,
                     "log_std_init": cfg.log_std_init}
        self.policy = _build_policy(self.spec).to(self.device)
        params = self.policy.parameters()
        if cfg.optimizer == "rmsprop":
            # The paper's optimiser: RMSProp, decay 0.99, no momentum.
            self.optimizer = torch.optim.RMSprop(params, lr=cfg.learning_rate, alpha=0.99, eps=cfg.optimizer_eps)
        else:
            self.optimizer = adam(params, cfg.learning_rate, eps=cfg.optimizer_eps)
        self.policy_version = 0
        self.actor_restarts = 0           # over the model's life (per call: actors/restarts)
        self.backend: Any = None
        self.actor_nodes: list[str] = []
        self.trajectories_per_batch = cfg.batch_size // (cfg.unroll_length * cfg.envs_per_actor)

    # ------------------------------------------------------------------ inference (spaces: Algorithm)
    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        return OnPolicyAlgorithm._predict(self, obs, deterministic)

    def export_policy(self) -> dict[str, Any] | None:
        return OnPolicyAlgorithm.export_policy(self)

    # ------------------------------------------------------------------ backends
    def _make_backend(self) -> Any:
        cfg = self.config
        if cfg.backend == "thread":
            return _ThreadBackend(self.spec, cfg.n_actors, cfg.actor_timeout, cfg.max_actor_restarts)
        if cfg.backend == "ray":
            backend = _RayBackend(self.spec, cfg.n_actors, cfg.actor_timeout, cfg.max_actor_restarts,
                                  cfg.ray_address, cfg.ray_actor_cpus)
        else:
            n_workers = cfg.n_workers if cfg.n_workers is not None else min(cfg.n_actors, os.cpu_count() or 1)
            backend = _LocalBackend(self.spec, cfg.n_actors, n_workers, cfg.actor_timeout,
                                    cfg.max_actor_restarts, sum(p.numel() for p in self.policy.parameters()))
        try:
            backend.publish(_flat_params(self.policy), self.policy_version)
            backend.start()
        except BaseException:
            backend.close()
            raise
        self.actor_nodes = list(getattr(backend, "nodes", []))   # Ray: the node each actor runs on
        return backend

    def train(self, total_timesteps: int | None = None, *, resume: bool = False) -> dict[str, Any]:
        """Train (see ``Algorithm.train``); actors run for the duration of this call."""
        try:
            return super().train(total_timesteps, resume=resume)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the actors (``train`` does it on return; safe to call twice)."""
        if self.backend is not None:
            backend, self.backend = self.backend, None
            self.actor_restarts += backend.restarts
            backend.close()

    # ------------------------------------------------------------------ one iteration: gather + learn
    def _gather(self) -> tuple[dict[str, torch.Tensor], list[int]]:
        """``trajectories_per_batch`` trajectories, side by side as columns of [T, B] arrays."""
        cfg = self.config
        layout = _layout(self.spec)
        K, E = self.trajectories_per_batch, cfg.envs_per_actor
        batch = {k: np.empty((shape[0], K * E, *shape[2:]), dtype) for k, (shape, dtype) in layout.items()}
        versions: list[int] = []
        for j, (traj, _actor, version, rets, lens) in enumerate(self.backend.trajectories(K)):
            for key, arr in batch.items():
                arr[:, j * E:(j + 1) * E] = traj[key]
            versions.append(version)
            self.record_episodes(rets, lens)
            self.num_timesteps += cfg.unroll_length * E
            if not self.callbacks.on_step():
                self.stop_requested = True
        return {k: torch.from_numpy(v).to(self.device) for k, v in batch.items()}, versions

    def _iteration(self) -> tuple[dict[str, Any], bool]:
        cfg = self.config
        if self.backend is None:
            t0 = time.perf_counter()
            self.backend = self._make_backend()
            self.time_phase("actor_start", time.perf_counter() - t0)
        lr = cfg.learning_rate * (self.progress_remaining if cfg.anneal_lr else 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.stop_requested = False
        keep_going = self.callbacks.on_rollout_start()
        t0 = time.perf_counter()
        batch, versions = self._gather()
        t_wait = time.perf_counter() - t0
        self.time_phase("actor_wait", t_wait)
        rollout = {"train/mean_reward": self.mean_reward, "train/episodes": self.episodes}
        keep_going = self.callbacks.on_rollout_end(rollout) and keep_going and not self.stop_requested

        t0 = time.perf_counter()
        loss, terms = impala_loss(self.policy, batch, gamma=cfg.gamma, rho_bar=cfg.rho_bar, c_bar=cfg.c_bar,
                                  vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm, foreach=True)
        self.optimizer.step()
        # Versioned weights back to the actors after every update.
        self.policy_version += 1
        self.backend.publish(_flat_params(self.policy), self.policy_version)
        t_update = time.perf_counter() - t0
        self.time_phase("gradient_update", t_update)

        staleness = [self.policy_version - 1 - v for v in versions]
        metrics = {**rollout, "train/learning_rate": lr, "loss/loss": loss.item(),
                   **{f"loss/{k}": float(v) for k, v in terms.items()},
                   "actors/staleness": float(np.mean(staleness)), "actors/max_staleness": float(max(staleness)),
                   "actors/restarts": self.actor_restarts + self.backend.restarts,
                   "actors/policy_version": self.policy_version,
                   "time/actor_wait": t_wait, "time/gradient_update": t_update}
        return metrics, keep_going

    # ------------------------------------------------------------------ persistence
    def _state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                "policy_version": self.policy_version, "actor_restarts": self.actor_restarts}

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.policy_version = int(state["policy_version"])
        self.actor_restarts = int(state.get("actor_restarts", 0))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
