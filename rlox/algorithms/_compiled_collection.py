"""On-policy rollouts in compiled code: ``CompiledCollection``, used by ``OnPolicyAlgorithm``
(PPO, A2C, VPG, TRPO; ``HybridPPO`` is PPO with it required).

``rlox._ext.hybrid.RolloutKernel`` runs, in one nogil loop over the steps: the actor and
critic forward pass for all envs as one float32 batch (``CompiledPolicy``; the MLP is defined
once, in ``ext/rlox_mlp.pxd``, for this kernel and the compiled update), action sampling from a
per-env xoshiro stream, the native env step (``ext/envs_core.pxd``), the truncation bootstrap
``r + gamma * V(final obs)``, resets and the rollout writes: no Python per step. GAE then runs
in one ``compute_gae_batched_f32`` call and the batch is laid out time-major (row
``t * n_envs + e``), as ``RolloutCollector`` lays it out, so the update (torch or compiled) sees
the same kind of batch from either collector.

Same pipeline as ``RolloutCollector.collect`` (same envs seeded ``seed + i``, same bootstrap,
same GAE); what differs is the random stream the actions are drawn from (per-env xoshiro
streams seeded from ``seed`` instead of the algorithm's ``torch.Generator``), so the same seed
gives other trajectories than the torch path, drawn from the same distributions
(tests/test_compiled_collection.py: exact replay of the env / bootstrap / GAE pipeline, log
probs and values equal to torch's float32 forward for the collected rows, and two-sample tests
of the sampled actions and episode lengths against the torch path).

Weights: one set, never copied. The kernel reads the torch parameters' own float32 memory
(with ``compiled_update`` on, the torch parameters are views of ``PPOUpdateKernel``'s flat
buffer, so collection and update read and write the same floats). At the start of every
rollout ``sync_weights`` compares the parameters' addresses with the ones the kernel reads and
re-points it when a tensor was replaced (``param.data = ...``, a re-shared buffer); in-place
changes (an optimizer step, ``load_state_dict``, a user's ``p.mul_``) need nothing at all. Only
parameters the kernel cannot read in place (another device, with ``compiled_collection=True``
and ``device="cuda"``; another dtype; non-contiguous) are staged through a float32 CPU copy at
each rollout (``zero_copy`` is then False).

Per-step callbacks (a callback overriding ``on_step``): the kernel then runs one step per env
per call and ``on_step`` is called after each, as the torch collector calls it after each
vector step. The trajectories are the same as in one call (the kernel's envs and streams carry
over between calls); only the speed drops.

When it runs (``compiled_collection``, an ``_OnPolicyConfig`` field): None picks it where it can
run, True requires it (a ValueError says why it cannot), False keeps ``RolloutCollector``.
``compiled_collection_unsupported`` lists what it needs.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import torch

from rlox.advantages import compute_gae_batched_f32
from rlox.collectors import RolloutBatch, RolloutCollector
from rlox.envs import NATIVE_ENV_IDS, is_native
from rlox.policies import ContinuousPolicy, DiscretePolicy

__all__ = ["CompiledCollection", "compiled_collection_unsupported"]


def compiled_collection_unsupported(algo: Any, *, auto: bool = True) -> str | None:
    """Why ``RolloutKernel`` cannot collect ``algo``'s rollouts, or None when it can.

    ``auto``: the rules of ``compiled_collection=None``, which also keeps a non-CPU device on
    the torch path (with True, the kernel runs on the CPU and the batch moves to the device)."""
    cfg = algo.config
    env_id = algo.collector.env_id
    if not is_native(env_id):
        return (f"the compiled collection runs the native envs only ({', '.join(NATIVE_ENV_IDS)}), got "
                f"{env_id!r}; pass compiled_collection=False (or None) to collect with torch")
    if auto and algo.device.type != "cpu":
        return (f"the compiled collection runs on the CPU, but device is {str(algo.device)!r}; pass "
                f"compiled_collection=True to collect on the CPU and move each batch to the device")
    if algo.custom_policy or getattr(algo.policy, "recurrent", False):
        return ("the compiled collection samples from rlox's default policy (the Tanh MLP the algorithm "
                "builds), not a custom or recurrent one; pass compiled_collection=False")
    if cfg.activation != "tanh":
        return (f"the compiled collection evaluates Tanh MLPs, got activation={cfg.activation!r}; pass "
                f"compiled_collection=False, or activation='tanh'")
    if cfg.use_sde:
        return ("the compiled collection samples plain Gaussian noise, not gSDE (use_sde=True); pass "
                "compiled_collection=False, or use_sde=False")
    if not isinstance(algo.policy, (DiscretePolicy, ContinuousPolicy)) or \
            getattr(algo.policy, "features", None) is not None:
        return (f"the compiled collection runs rlox.policies' MLP DiscretePolicy / ContinuousPolicy, got "
                f"{type(algo.policy).__name__}; pass compiled_collection=False")
    if algo.collector.normalizer is not None or type(algo.collector.env).__name__ != "VecEnv":
        return ("the compiled collection steps the bare native envs, without normalisation or wrappers "
                "(normalize_obs / normalize_rewards / wrappers=); pass compiled_collection=False")
    if cfg.rollout_episodes is not None:
        return ("the compiled collection steps n_steps per env, not episode-bounded rollouts "
                "(rollout_episodes); pass compiled_collection=False")
    return None


def _weight_tensors(policy: torch.nn.Module) -> list[torch.Tensor]:
    """The tensors the kernel reads: each actor Linear's weight and bias, then the critic's,
    then (Gaussian) log_std."""
    # (the modules' own dicts: nn.Module.__getattr__ made this a 14 us call, run every rollout)
    out = [t for net in (policy.actor, policy.critic) for m in net._modules.values()
           if isinstance(m, torch.nn.Linear) for t in (m._parameters["weight"], m._parameters["bias"])]
    if not policy.discrete:
        out.append(policy.log_std)
    return out


def _in_place(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and t.dtype == torch.float32 and t.is_contiguous()


class CompiledCollection:
    """The compiled policy and rollout kernel of one on-policy algorithm.

    Args:
        policy: the algorithm's ``DiscretePolicy`` / ``ContinuousPolicy`` (Tanh MLPs).
        env_id: a native env id.
        n_envs: envs; env i is seeded ``seed + i`` like ``RolloutCollector``'s ``VecEnv``.
        seed: env seed, and the seed of the per-env action streams (``seed * 1_000_003 + i``).
        gamma, gae_lambda: discount (bootstrap and GAE) and GAE lambda.
        device: where the batch tensors go.
    """

    def __init__(self, policy: torch.nn.Module, env_id: str, n_envs: int, seed: int, gamma: float,
                 gae_lambda: float, device: torch.device) -> None:
        from rlox._ext.hybrid import CompiledPolicy, RolloutKernel

        self.discrete = bool(policy.discrete)
        self.n_envs, self.gamma, self.gae_lambda, self.device = int(n_envs), float(gamma), float(gae_lambda), device
        self._ptrs: list[int] | None = None
        self.zero_copy = True
        actor, critic, log_std = self._arrays(policy)
        self.policy = CompiledPolicy(actor, critic, discrete=self.discrete, log_std=log_std,
                                     n_streams=self.n_envs, seed=seed)
        self.kernel = RolloutKernel(self.policy, env_id, self.n_envs, seed=seed)
        self.episode_returns: np.ndarray = np.zeros(0)
        self.episode_lengths: np.ndarray = np.zeros(0, dtype=np.int64)
        self.stop_requested = False

    def _arrays(self, policy: torch.nn.Module) -> tuple[list, list, np.ndarray | None]:
        """NumPy views of the parameters the kernel reads (float32 CPU copies where it cannot
        read them in place), as (actor pairs, critic pairs, log_std); records their addresses."""
        ts = _weight_tensors(policy)
        self.zero_copy = all(_in_place(t) for t in ts)
        if self.zero_copy:
            arrays = [t.detach().numpy() for t in ts]
            self._ptrs = [t.data_ptr() for t in ts]
        else:
            arrays = [t.detach().to("cpu", torch.float32).contiguous().numpy() for t in ts]
            self._ptrs = None
        n_a = 2 * sum(isinstance(m, torch.nn.Linear) for m in policy.actor)
        pairs = [(arrays[i], arrays[i + 1]) for i in range(0, len(arrays) - (0 if self.discrete else 1), 2)]
        return pairs[:n_a // 2], pairs[n_a // 2:], (None if self.discrete else arrays[-1])

    def sync_weights(self, policy: torch.nn.Module) -> None:
        """Make the kernel read ``policy``'s current parameters: nothing to do while they are the
        tensors it already reads (the usual case: updates write them in place); re-points it
        when one was replaced; re-stages the CPU copy where it cannot read them in place."""
        if self._ptrs is not None and [t.data_ptr() for t in _weight_tensors(policy)] == self._ptrs:
            return
        self.policy.set_weights(*self._arrays(policy))

    def collect(self, policy: torch.nn.Module, n_steps: int,
                on_step: Callable[[], Any] | None = None) -> tuple[RolloutBatch, float, float]:
        """``n_steps`` per env with ``policy``'s current weights -> (batch, kernel seconds, GAE
        seconds). With ``on_step``, one kernel call per step and ``on_step()`` after each (a
        False return sets ``stop_requested``; the rollout still completes)."""
        import time

        self.sync_weights(policy)
        self.stop_requested = False
        N, T, gamma = self.n_envs, int(n_steps), self.gamma
        t0 = time.perf_counter()
        if on_step is None:
            out = self.kernel.collect(T, gamma)
        else:
            chunks = []
            for _ in range(T):
                chunks.append(self.kernel.collect(1, gamma))
                if on_step() is False:
                    self.stop_requested = True
            out = {k: np.concatenate([c[k] for c in chunks], axis=1)
                   for k in ("obs", "actions", "log_probs", "values", "rewards", "dones")}
            out["last_values"] = chunks[-1]["last_values"]
            out["episode_returns"] = np.concatenate([c["episode_returns"] for c in chunks])
            out["episode_lengths"] = np.concatenate([c["episode_lengths"] for c in chunks])
        t1 = time.perf_counter()
        # GAE on the kernel's env-major rows [N, T], then everything time-major and flat.
        adv, ret = compute_gae_batched_f32(out["rewards"].reshape(-1), out["values"].reshape(-1),
                                           out["dones"].reshape(-1), out["last_values"],
                                           n_steps=T, gamma=gamma, lam=self.gae_lambda)
        t2 = time.perf_counter()
        self.episode_returns, self.episode_lengths = out["episode_returns"], out["episode_lengths"]
        dev = self.device

        def flat(a: np.ndarray) -> torch.Tensor:     # [N, T, *tail] -> [T * N, *tail]
            a = a.reshape(N, T, -1)
            a = np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(T * N, *a.shape[2:])
            return torch.from_numpy(a if a.shape[1:] != (1,) else a.reshape(-1)).to(dev)

        actions = flat(out["actions"])
        actions = actions.long() if self.discrete else actions.reshape(T * N, -1)
        batch = RolloutBatch(obs=flat(out["obs"]), actions=actions, log_probs=flat(out["log_probs"]),
                             values=flat(out["values"]), rewards=flat(out["rewards"]), dones=flat(out["dones"]),
                             advantages=flat(adv), returns=flat(ret))
        return batch, t1 - t0, t2 - t1

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The envs, current observations, episode accumulators and action streams."""
        return {"kernel": self.kernel.get_state(), "compiled_rng": self.policy.get_rng_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.kernel.set_state(state["kernel"])
        self.policy.set_rng_state(state["compiled_rng"])

    def to_collector(self, collector: RolloutCollector) -> None:
        """Hand the envs (physics, counters, RNG), observations and episode accumulators to the
        torch collector, so a switch to it continues the same episodes."""
        ks = self.kernel.get_state()
        if collector._obs is None:
            collector.reset()                       # (the VecEnv's header says it was reset)
        header = np.asarray(collector.env.get_state())[:16]
        collector.env.set_state(np.concatenate([header, ks["envs"]]))
        collector._obs = ks["obs"].reshape(self.n_envs, -1).astype(np.float32)
        collector._ep_ret = ks["ep_ret"].copy()
        collector._ep_len = ks["ep_len"].copy()

    def from_collector(self, collector: RolloutCollector) -> None:
        """The reverse of ``to_collector`` (nothing to take before the collector's first rollout)."""
        if collector._obs is None:
            return
        ks = self.kernel.get_state()
        self.kernel.set_state({"kind": ks["kind"], "envs": np.asarray(collector.env.get_state())[16:],
                               "obs": collector._obs.astype(np.float64).reshape(-1),
                               "ep_ret": collector._ep_ret, "ep_len": collector._ep_len})
