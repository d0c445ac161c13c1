"""Every kernel ``def`` boundary under hostile array layouts, in one parametrised test.

Each case calls one boundary with small well-formed arrays (the reference result), then again
with every array argument byte-swapped, non-contiguous, read-only, zero-length or of a wrong
dtype (complex). Layout changes must give exactly the reference result (the shared checks in
ext/_checks.pxd convert them); a zero-length input gives a result or a ValueError; a wrong dtype
gives a TypeError or ValueError that names the argument. A segfault fails the whole run.
"""
import numpy as np
import pytest
import torch

import rlox
from rlox._ext.hybrid import CompiledPolicy
from rlox._ext.ppo_update import PPOUpdateKernel

RNG = np.random.default_rng(0)


def f64(*shape):
    return RNG.normal(size=shape)


def f32(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def flags(n):
    return (RNG.random(n) < 0.3).astype(np.float64)


def _replay(obs, actions, rewards, terminated, truncated, next_obs):
    buf = rlox.ReplayBuffer(16, obs_dim=3, act_dim=2, seed=0)
    buf.push_batch(obs, actions, rewards, terminated, truncated, next_obs)
    return buf.gather(np.arange(len(buf)))


def _replay_push(obs, action, next_obs):
    buf = rlox.ReplayBuffer(4, obs_dim=3, act_dim=2, seed=0)
    buf.push(obs, action, 1.0, False, False, next_obs)
    return buf.gather([0])


def _per(indices, priorities):
    buf = rlox.PrioritizedReplayBuffer(8, obs_dim=2, act_dim=1, seed=0)
    buf.push_batch(np.zeros((6, 2)), np.zeros((6, 1)), np.ones(6), np.zeros(6), np.zeros(6),
                   np.zeros((6, 2)))
    buf.update_priorities(indices, priorities)
    return buf.priorities()


def _table(obs, actions, rewards, terminated):
    t = rlox.ExperienceTable(obs_dim=3, act_dim=2)
    t.push_batch(obs, actions, rewards, terminated)
    return t.columns()


def _tree(indices, values, masses):
    t = rlox.SumMinTree(8)
    t.update(indices, values)
    return t.get(np.arange(8)), (t.find(masses) if t.total() > 0 else None)


def _stats(values):
    s = rlox.RunningStats()
    s.batch_update(values)
    return s.count(), s.mean(), s.var()


def _stats_vec(batch, x):
    s = rlox.RunningStatsVec(3)
    s.update(batch)
    return s.mean(), s.var(), s.normalize(x)


def _store(tokens):
    store = rlox.VarLenStore()
    store.push(tokens)
    return store.get(0)


def _policy(obs):
    torch.manual_seed(0)
    actor, critic = torch.nn.Linear(3, 2), torch.nn.Linear(3, 1)
    pairs = [lambda m: [(m.weight.detach().numpy(), m.bias.detach().numpy())]]
    pol = CompiledPolicy(pairs[0](actor), pairs[0](critic), discrete=True, n_streams=8)
    return pol.forward(obs)


def _ppo_kernel(obs, actions, old_log_probs, advantages, returns, old_values, order):
    torch.manual_seed(0)
    k = PPOUpdateKernel(3, [8], 2, True)
    k.bind(obs, actions, old_log_probs, advantages, returns, old_values)
    k.run_epoch(order, 2, 1e-3, 0.2)
    return k.flat_parameters


def _vec_step(actions):
    env = rlox.VecEnv(4, seed=0, env_id="CartPole-v1")
    env.reset_all()
    return env.step_all(actions)


def _frame(frame, prev):
    from rlox._ext.frames import preprocess_frame

    return preprocess_frame(frame, prev, np.empty((5, 7), np.uint8))


def _frames(frames, prev):
    from rlox._ext.frames import preprocess_frames

    return preprocess_frames(frames, prev, np.empty((len(frames), 5, 7), np.uint8))


def u8(*shape):
    return RNG.integers(0, 256, shape, dtype=np.uint8)


# name -> (call, arrays). ``arrays`` are the keyword arguments that the variants transform.
CASES = {
    "compute_gae": (lambda **a: rlox.compute_gae(**a, last_value=0.5, gamma=0.99, lam=0.95),
                    dict(rewards=f64(6), values=f64(6), dones=flags(6))),
    "compute_gae_batched": (
        lambda **a: rlox.compute_gae_batched(**a, n_steps=3, gamma=0.99, lam=0.95),
        dict(rewards=f64(6), values=f64(6), dones=flags(6), last_values=f64(2))),
    "compute_gae_batched_f32": (
        lambda **a: rlox.compute_gae_batched_f32(**a, n_steps=3, gamma=0.99, lam=0.95),
        dict(rewards=f32(6), values=f32(6), dones=flags(6).astype(np.float32),
             last_values=f32(2))),
    "compute_vtrace": (lambda **a: rlox.compute_vtrace(**a, bootstrap_value=0.1, gamma=0.99),
                       dict(log_rhos=f64(5) * 0.1, rewards=f64(5), values=f64(5), dones=flags(5))),
    "compute_vtrace_f32": (lambda **a: rlox.compute_vtrace(**a, bootstrap_value=0.1, gamma=0.99),
                           dict(log_rhos=f32(5) * 0.1, rewards=f32(5), values=f32(5),
                                dones=flags(5).astype(np.float32))),
    "ReplayBuffer.push_batch": (_replay, dict(
        obs=f32(4, 3), actions=f32(4, 2), rewards=f32(4), terminated=flags(4),
        truncated=flags(4), next_obs=f32(4, 3))),
    "ReplayBuffer.push": (_replay_push, dict(obs=f32(3), action=f32(2), next_obs=f32(3))),
    "PrioritizedReplayBuffer.update_priorities": (_per, dict(
        indices=np.array([0, 3, 5], np.int64), priorities=np.array([0.5, 2.0, 1.0]))),
    "ExperienceTable.push_batch": (_table, dict(
        obs=f32(4, 3), actions=f32(4, 2), rewards=f32(4), terminated=flags(4))),
    "compute_nstep_targets": (
        lambda source, indices: rlox.compute_nstep_targets(tuple(source), indices, n=2, gamma=0.9),
        dict(source=[f32(6), flags(6), np.zeros(6)], indices=np.array([0, 2, 4], np.int64))),
    "SumMinTree": (_tree, dict(indices=np.array([1, 4, 6], np.int64),
                               values=np.array([1.0, 2.0, 0.5]), masses=np.array([0.2, 1.7, 3.1]))),
    "RunningStats.batch_update": (_stats, dict(values=f64(7))),
    "RunningStatsVec": (_stats_vec, dict(batch=f64(5, 3), x=f64(2, 3))),
    "compute_group_advantages": (lambda **a: rlox.compute_group_advantages(**a),
                                 dict(rewards=f64(4))),
    "compute_batch_group_advantages": (
        lambda **a: rlox.compute_batch_group_advantages(**a, group_size=2), dict(rewards=f64(6))),
    "compute_token_kl": (lambda **a: rlox.compute_token_kl(**a),
                         dict(log_p=f64(7), log_q=f64(7), mask=flags(7))),
    "compute_token_kl_f32": (lambda **a: rlox.compute_token_kl_f32(**a),
                             dict(log_p=f32(7), log_q=f32(7))),
    "compute_batch_token_kl": (lambda **a: rlox.compute_batch_token_kl(**a, reduction="mean"),
                               dict(log_p=f64(3, 4), log_q=f64(3, 4), mask=flags(12).reshape(3, 4))),
    "compute_token_kl_per_token": (lambda **a: rlox.compute_token_kl_per_token(**a),
                                   dict(log_p=f32(2, 5), log_q=f32(2, 5))),
    "pack_sequences": (lambda sequences: rlox.pack_sequences(sequences, 8),
                       dict(sequences=[np.array([1, 2, 3], np.uint32), np.array([4, 5], np.uint32)])),
    "DPOPair": (lambda **a: (lambda p: (p.chosen_input_ids, p.rejected_input_ids))(rlox.DPOPair(**a)),
                dict(prompt_tokens=np.array([1, 2], np.uint32), chosen_tokens=np.array([3, 4], np.uint32),
                     rejected_tokens=np.array([5], np.uint32))),
    "VarLenStore.push": (_store, dict(tokens=np.array([7, 8, 9], np.uint32))),
    "CompiledPolicy.forward": (_policy, dict(obs=f64(4, 3))),
    "PPOUpdateKernel": (_ppo_kernel, dict(
        obs=f32(4, 3), actions=np.array([0, 1, 1, 0], np.int64), old_log_probs=f32(4) - 1,
        advantages=f32(4), returns=f32(4), old_values=f32(4), order=np.array([3, 1, 0, 2], np.int64))),
    "VecEnv.step": (_vec_step, dict(actions=np.array([0, 1, 1, 0], np.int64))),
    "preprocess_frame": (_frame, dict(frame=u8(12, 10, 3), prev=u8(12, 10, 3))),
    "preprocess_frames": (_frames, dict(frames=u8(3, 12, 10), prev=u8(3, 12, 10))),
}


def _byteswapped(a):
    return a.astype(a.dtype.newbyteorder())


def _noncontiguous(a):
    return np.repeat(a, 2, axis=-1)[..., ::2] if a.ndim else a


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _empty(a):
    return a[:0] if a.ndim else a


def _wrong_dtype(a):
    return a.astype(np.complex128)


VARIANTS = {"byteswapped": _byteswapped, "noncontiguous": _noncontiguous, "readonly": _readonly,
            "empty": _empty, "wrong_dtype": _wrong_dtype}


def _apply(value, fn):
    if isinstance(value, list):
        return [fn(v) for v in value]
    return fn(value)


def _leaves(x):
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _leaves(x[k])]
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in _leaves(v)]
    if hasattr(x, "__array__") or isinstance(x, (int, float)) or x is None:
        return [x]
    return [leaf for v in vars(x).values() for leaf in _leaves(v)] if hasattr(x, "__dict__") else [x]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_boundary(case, variant):
    call, arrays = CASES[case]
    reference = call(**{k: _apply(v, np.copy) for k, v in arrays.items()})
    args = {k: _apply(v, VARIANTS[variant]) for k, v in arrays.items()}
    if variant == "noncontiguous":
        assert all(not a.flags.c_contiguous for v in args.values() for a in _apply(v, lambda a: a)
                   if a.ndim and a.size > 1)
    if variant == "wrong_dtype":
        with pytest.raises((TypeError, ValueError)) as info:
            call(**args)
        assert any(name in str(info.value) for name in (*arrays, "rewards", "terminated", "truncated", "action", "token ids")), str(info.value)
        return
    if variant == "empty":
        try:
            call(**args)
        except (ValueError, IndexError) as exc:  # refused with a message, never a crash
            assert str(exc)
        return
    result = call(**args)
    for got, want in zip(_leaves(result), _leaves(reference), strict=True):
        if isinstance(want, (np.ndarray, float, int)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{case} {variant}")
            assert np.asarray(got).dtype == np.asarray(want).dtype, f"{case} {variant}"
