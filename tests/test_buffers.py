"""Replay storage kernels (ext/buffers.pyx, per.pyx, mmap_buffer.pyx, nstep.pyx, experience_table.pyx, ext/trees.pyx) against the oracles in
tests/reference/buffers.py."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import rlox
from tests._threads import kernel_threads
from rlox.errors import RloxWarning
from tests.reference import buffers as ref

REPO = Path(__file__).resolve().parent.parent


def transition(i, obs_dim=3, act_dim=2):
    """Transition number i: every field encodes i, so misaligned fields are caught."""
    obs = (8 * i + np.arange(obs_dim)).astype(np.float32)
    return dict(obs=obs, action=np.full(act_dim, -i, np.float32), reward=float(10 * i),
                terminated=i % 2 == 1, truncated=i % 3 == 0, next_obs=obs + 1)


def batch_of(ids, obs_dim=3, act_dim=2):
    ts = [transition(i, obs_dim, act_dim) for i in ids]
    if not ts:
        return dict(obs=np.zeros((0, obs_dim), np.float32), actions=np.zeros((0, act_dim)),
                    rewards=np.zeros(0), terminated=np.zeros(0), truncated=np.zeros(0),
                    next_obs=np.zeros((0, obs_dim), np.float32))
    return dict(obs=np.stack([t["obs"] for t in ts]), actions=np.stack([t["action"] for t in ts]),
                rewards=np.array([t["reward"] for t in ts]),
                terminated=np.array([t["terminated"] for t in ts]),
                truncated=np.array([t["truncated"] for t in ts]),
                next_obs=np.stack([t["next_obs"] for t in ts]))


def all_live(buf):
    return buf.gather(np.arange(len(buf)))


def assert_aligned(batch, obs_dim=3):
    """Every row of a batch comes from one transition (all fields encode the same i)."""
    obs = batch["obs"].astype(np.float64)
    i = obs[:, 0] / 8
    np.testing.assert_array_equal(obs - obs[:, :1], np.broadcast_to(np.arange(obs_dim), obs.shape))
    np.testing.assert_array_equal(batch["next_obs"].astype(np.float64), obs + 1)
    np.testing.assert_array_equal(batch["actions"], -np.repeat(i[:, None], 2, 1))
    np.testing.assert_array_equal(batch["rewards"], 10 * i)
    np.testing.assert_array_equal(batch["terminated"], (i % 2 == 1).astype(np.float32))
    np.testing.assert_array_equal(batch["truncated"], (i % 3 == 0).astype(np.float32))
    return i.astype(int)


# ---------------------------------------------------------------------------- ReplayBuffer
def test_guide_calls_and_shapes():
    buf = rlox.ReplayBuffer(capacity=100_000, obs_dim=4, act_dim=1)
    buf.push(np.zeros(4, np.float32), action=np.array([0.5], np.float32), reward=1.0,
             terminated=False, truncated=False, next_obs=np.ones(4, np.float32))
    batch = buf.sample(batch_size=32, seed=0)
    assert set(batch) == {"obs", "next_obs", "actions", "rewards", "terminated", "truncated",
                          "indices"}
    assert batch["obs"].shape == (32, 4) and batch["obs"].dtype == np.float32
    assert batch["actions"].shape == (32, 1) and batch["rewards"].shape == (32,)
    assert batch["indices"].dtype == np.int64 and (batch["indices"] == 0).all()
    np.testing.assert_array_equal(batch["next_obs"], 1.0)
    np.testing.assert_array_equal(batch["actions"], 0.5)
    assert len(buf) == 1 and buf.capacity == 100_000


@pytest.mark.parametrize("capacity,n_push", [(5, 13), (5, 5), (7, 3), (1, 4)])
def test_wraparound_keeps_newest_aligned(capacity, n_push):
    buf = rlox.ReplayBuffer(capacity, obs_dim=3, act_dim=2)
    for i in range(n_push):
        buf.push(**transition(i))
    assert len(buf) == min(capacity, n_push)
    ids = assert_aligned(all_live(buf))
    assert sorted(ids) == list(range(max(0, n_push - capacity), n_push))
    assert buf.pos == n_push % capacity
    # the newest transition sits just before pos
    assert ids[(buf.pos - 1) % capacity] == n_push - 1


@given(st.lists(st.integers(0, 12), min_size=1, max_size=8), st.integers(1, 9),
       st.sampled_from([np.float32, np.uint8]))
@settings(max_examples=40)
def test_push_batch_equals_repeated_push(sizes, capacity, dtype):
    a = rlox.ReplayBuffer(capacity, obs_dim=3, act_dim=2, obs_dtype=dtype, seed=1)
    b = rlox.ReplayBuffer(capacity, obs_dim=3, act_dim=2, obs_dtype=dtype, seed=1)
    i = 0
    for n in sizes:
        ids = list(range(i, i + n))
        bt = batch_of(ids)
        bt["obs"], bt["next_obs"] = bt["obs"].astype(dtype), bt["next_obs"].astype(dtype)
        a.push_batch(**bt)
        for k in range(n):
            t = transition(i + k)
            t["obs"], t["next_obs"] = t["obs"].astype(dtype), t["next_obs"].astype(dtype)
            b.push(**t)
        i += n
    assert len(a) == len(b) and a.pos == b.pos
    if len(a):
        ga, gb = all_live(a), all_live(b)
        for k in ref.FIELDS:
            np.testing.assert_array_equal(ga[k], gb[k])
        np.testing.assert_array_equal(a.sample(16, seed=3)["obs"], b.sample(16, seed=3)["obs"])


def test_push_batch_input_forms():
    bt = batch_of(range(4))
    flat = dict(bt, obs=bt["obs"].ravel(), next_obs=bt["next_obs"].ravel(),
                actions=bt["actions"].ravel())
    a, b = rlox.ReplayBuffer(8, 3, 2), rlox.ReplayBuffer(8, 3, 2)
    a.push_batch(**bt)
    b.push_batch(**flat)
    for k in ref.FIELDS:
        np.testing.assert_array_equal(all_live(a)[k], all_live(b)[k])
    # float64 and int inputs convert; a 1-D actions array when act_dim == 1
    c = rlox.ReplayBuffer(8, 3, 1)
    c.push_batch(bt["obs"].astype(np.float64), np.arange(4), [1, 2, 3, 4], [0, 1, 0, 0],
                 [False] * 4, bt["next_obs"])
    np.testing.assert_array_equal(all_live(c)["actions"][:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(all_live(c)["terminated"], [0, 1, 0, 0])
    c.push_batch(np.zeros((0, 3)), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0),
                 np.zeros((0, 3)))
    assert len(c) == 4


def test_push_input_forms():
    buf = rlox.ReplayBuffer(10, obs_dim=3, act_dim=1)
    buf.push([1, 2, 3], 2, 1, True, 0, np.array([4.0, 5.0, 6.0]))          # lists, ints, float64
    buf.push(np.arange(3, dtype=np.float32), 0.5, np.float32(2.0), np.bool_(False),
             np.bool_(True), np.arange(3, dtype=np.float32)[::-1].copy())
    buf.push(np.arange(6, dtype=np.float32)[::2], np.array([3.0]), 3.0, False, False,
             np.arange(3, dtype=np.float32))                                  # strided view
    g = all_live(buf)
    np.testing.assert_array_equal(g["obs"], [[1, 2, 3], [0, 1, 2], [0, 2, 4]])
    np.testing.assert_array_equal(g["actions"][:, 0], [2, 0.5, 3])
    np.testing.assert_array_equal(g["rewards"], [1, 2, 3])
    np.testing.assert_array_equal(g["terminated"], [1, 0, 0])
    np.testing.assert_array_equal(g["truncated"], [0, 1, 0])


def test_image_observations_uint8():
    buf = rlox.ReplayBuffer(6, obs_shape=(4, 4, 2), obs_dtype=np.uint8, act_dim=1)
    assert buf.obs_dim == 32
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (9, 4, 4, 2), dtype=np.uint8)
    for i in range(8):
        obs = frames[i] if i % 2 else frames[i].reshape(-1)      # shaped or flat
        buf.push(obs, float(i), 0.0, False, False, frames[i + 1])
    batch = buf.sample(20, seed=0)
    assert batch["obs"].dtype == np.uint8 and batch["obs"].shape == (20, 4, 4, 2)
    ids = batch["actions"][:, 0].astype(int)
    np.testing.assert_array_equal(batch["obs"], frames[ids])
    np.testing.assert_array_equal(batch["next_obs"], frames[ids + 1])
    with pytest.raises(TypeError, match="uint8"):
        buf.push(frames[0].astype(np.float32), 0.0, 0.0, False, False, frames[0])
    with pytest.raises(ValueError, match=r"expected \(4, 4, 2\) or \(32,\)"):
        buf.push(frames[0].reshape(8, 4), 0.0, 0.0, False, False, frames[0])


def test_seeded_sampling_is_deterministic():
    buf = rlox.ReplayBuffer(50, obs_dim=3, act_dim=2, seed=7)
    buf.push_batch(**batch_of(range(40)))
    a, b = buf.sample(64, seed=123), buf.sample(64, seed=123)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["indices"], buf.sample(64, seed=124)["indices"])
    assert_aligned(a)
    # unseeded: the buffer's own stream advances, and is reproducible from the constructor seed
    u1, u2 = buf.sample(64)["indices"], buf.sample(64)["indices"]
    assert not np.array_equal(u1, u2)
    twin = rlox.ReplayBuffer(50, obs_dim=3, act_dim=2, seed=7)
    twin.push_batch(**batch_of(range(40)))
    np.testing.assert_array_equal(twin.sample(64)["indices"], u1)


def test_sampling_is_uniform_over_live_transitions():
    scipy_stats = pytest.importorskip("scipy.stats")
    buf = rlox.ReplayBuffer(64, obs_dim=3, act_dim=2)
    buf.push_batch(**batch_of(range(100)))          # wrapped: 64 live, ids 36..99
    idx = np.concatenate([buf.sample(1000, seed=s)["indices"] for s in range(64)])
    counts = np.bincount(idx, minlength=64)
    assert counts.shape == (64,)
    assert scipy_stats.chisquare(counts).pvalue > 1e-4
    part = rlox.ReplayBuffer(64, obs_dim=3, act_dim=2)
    part.push_batch(**batch_of(range(10)))
    assert part.sample(5000, seed=0)["indices"].max() == 9     # never an empty slot


def test_gather_fields_and_bounds():
    buf = rlox.ReplayBuffer(8, obs_dim=3, act_dim=2)
    buf.push_batch(**batch_of(range(5)))
    g = buf.gather([4, 0], fields=("next_obs", "rewards"))
    assert set(g) == {"next_obs", "rewards"}
    np.testing.assert_array_equal(g["rewards"], [40, 0])
    with pytest.raises(IndexError, match="index 5 out of range"):
        buf.gather([5])
    with pytest.raises(ValueError, match="unknown field"):
        buf.gather([0], fields=("weights",))


def test_clear():
    buf = rlox.ReplayBuffer(4, obs_dim=3, act_dim=2)
    buf.push_batch(**batch_of(range(6)))
    buf.clear()
    assert len(buf) == 0 and buf.pos == 0
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1)
    buf.push(**transition(9))
    assert assert_aligned(buf.sample(3, seed=0)).tolist() == [9, 9, 9]


@pytest.mark.parametrize("suffix", [".npz", ""])
def test_save_load_round_trip(tmp_path, suffix):
    buf = rlox.ReplayBuffer(16, obs_dim=3, act_dim=2, seed=5)
    buf.push_batch(**batch_of(range(21)))
    buf.sample(4)                                    # advance the stream
    path = tmp_path / f"buf{suffix}"
    buf.save(path)
    back = rlox.ReplayBuffer.load(path)
    assert (len(back), back.pos, back.capacity, back.obs_shape) == (16, 5, 16, (3,))
    for k in ref.FIELDS:
        np.testing.assert_array_equal(all_live(back)[k], all_live(buf)[k])
    # the random stream resumes where it was
    np.testing.assert_array_equal(back.sample(32)["indices"], buf.sample(32)["indices"])
    back.push(**transition(100))
    buf.push(**transition(100))
    np.testing.assert_array_equal(all_live(back)["obs"], all_live(buf)["obs"])
    with pytest.raises(ValueError, match="PrioritizedReplayBuffer.load|not a Prior"):
        rlox.PrioritizedReplayBuffer.load(path)


def test_load_rejects_other_files(tmp_path):
    np.savez(tmp_path / "x.npz", meta=np.array('{"format": "something"}'), obs=np.zeros(3))
    with pytest.raises(ValueError, match="not a saved rlox replay buffer"):
        rlox.ReplayBuffer.load(tmp_path / "x.npz")
    with pytest.raises(FileNotFoundError):
        rlox.ReplayBuffer.load(tmp_path / "missing.npz")


def test_bad_input_messages():
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        rlox.ReplayBuffer(0, obs_dim=4)
    with pytest.raises(TypeError, match="capacity must be an int"):
        rlox.ReplayBuffer(2.5, obs_dim=4)
    with pytest.raises(ValueError, match="act_dim must be >= 1"):
        rlox.ReplayBuffer(4, obs_dim=4, act_dim=0)
    with pytest.raises(TypeError, match="obs_dtype"):
        rlox.ReplayBuffer(4, obs_dim=4, obs_dtype=np.int32)
    with pytest.raises(ValueError, match="disagrees"):
        rlox.ReplayBuffer(4, obs_dim=5, obs_shape=(2, 2))
    buf = rlox.ReplayBuffer(4, obs_dim=4, act_dim=2)
    ok = dict(obs=np.zeros(4, np.float32), action=np.zeros(2, np.float32), reward=0.0,
              terminated=False, truncated=False, next_obs=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="empty"):
        buf.sample(8)
    with pytest.raises(ValueError, match=r"obs has shape \(3,\), expected \(4,\)"):
        buf.push(**dict(ok, obs=np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match=r"next_obs has shape \(2, 2\), expected \(4,\)"):
        buf.push(**dict(ok, next_obs=np.zeros((2, 2), np.float32)))
    with pytest.raises(ValueError, match=r"action has shape \(3,\), expected \(2,\)"):
        buf.push(**dict(ok, action=np.zeros(3)))
    with pytest.raises(TypeError, match="obs must hold real numbers"):
        buf.push(**dict(ok, obs=np.array(["a"] * 4)))
    with pytest.raises(ValueError, match="reward must be finite"):
        buf.push(**dict(ok, reward=float("nan")))
    with pytest.raises(TypeError, match="reward must be a real number"):
        buf.push(**dict(ok, reward="x"))
    assert len(buf) == 0                              # nothing half-written
    buf.push(**ok)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="batch_size must be >= 1"):
            buf.sample(bad)
    with pytest.raises(TypeError, match="batch_size must be an int"):
        buf.sample(2.0)
    with pytest.raises(TypeError, match="seed must be an int"):
        buf.sample(2, seed="a")
    with pytest.raises(ValueError, match=r"obs has shape \(2, 3\), expected \(2, 4\)"):
        buf.push_batch(np.zeros((2, 3)), np.zeros((2, 2)), np.zeros(2), np.zeros(2),
                       np.zeros(2), np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"actions has shape \(2,\), expected \(2, 2\)"):
        buf.push_batch(np.zeros((2, 4)), np.zeros(2), np.zeros(2), np.zeros(2),
                       np.zeros(2), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="terminated has 3 entries, expected 2"):
        buf.push_batch(np.zeros((2, 4)), np.zeros((2, 2)), np.zeros(2), np.zeros(3),
                       np.zeros(2), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="rewards must be finite"):
        buf.push_batch(np.zeros((2, 4)), np.zeros((2, 2)), [0, np.inf], np.zeros(2),
                       np.zeros(2), np.zeros((2, 4)))
    assert len(buf) == 1


# ---------------------------------------------------------------------------- trees
@st.composite
def tree_ops(draw):
    cap = draw(st.integers(1, 40))
    ops = draw(st.lists(st.tuples(st.integers(0, cap - 1),
                                  st.one_of(st.just(0.0), st.floats(1e-3, 1e3))),
                        min_size=1, max_size=60))
    return cap, ops


@given(tree_ops(), st.lists(st.floats(0.01, 0.99), min_size=1, max_size=10))
def test_trees_match_brute_force(case, fracs):
    cap, ops = case
    tree = rlox.SumMinTree(cap)
    leaves = np.zeros(cap)
    set_ = np.zeros(cap, bool)
    # one batched update with repeats (last wins), then single updates
    idx, vals = zip(*ops)
    tree.update(list(idx), list(vals))
    for i, v in ops:
        leaves[i] = v
        set_[i] = True
    for i, v in ops[::3]:
        tree.update([i], [v * 0.5])
        leaves[i] = v * 0.5
    np.testing.assert_allclose(tree.total(), leaves.sum(), rtol=1e-12)
    assert tree.min() == leaves[set_].min()
    np.testing.assert_array_equal(tree.get(np.arange(cap)), leaves)
    if leaves.sum() > 0:
        prefix = np.concatenate([[0.0], np.cumsum(leaves)])
        nz = np.flatnonzero(leaves > 0)
        for k, f in enumerate(fracs):
            i = nz[k % len(nz)]
            mass = prefix[i] + f * leaves[i]
            assert tree.find([mass])[0] == ref.tree_find(leaves, mass) == i
        # masses at or past the total land on the last non-empty leaf, never an empty one
        assert tree.find([tree.total()])[0] == nz[-1]
        draws = tree.sample_stratified(64, seed=1)
        assert (leaves[draws] > 0).all()


def test_tree_errors_and_reset():
    t = rlox.SumMinTree(4)
    with pytest.raises(ValueError, match="total is 0"):
        t.find([0.0])
    t.update([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    t.reset([3])
    assert t.total() == 6.0 and t.min() == 1.0 and t.find([5.9])[0] == 2
    with pytest.raises(IndexError, match="index 4 out of range"):
        t.update([4], [1.0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        t.update([0], [-1.0])
    with pytest.raises(ValueError, match="finite and >= 0"):
        t.update([0], [np.nan])
    with pytest.raises(ValueError, match="must lie in"):
        t.find([7.0])
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        rlox.SumMinTree(0)


def test_tree_find_thread_invariant(n_threads):
    rng = np.random.default_rng(0)
    t = rlox.SumMinTree(1000)
    t.update(np.arange(1000), rng.random(1000))
    masses = rng.random(10_000) * t.total()          # above the parallel threshold
    with kernel_threads(1):
        serial = t.find(masses)
    np.testing.assert_array_equal(t.find(masses), serial)
    leaves = t.get(np.arange(1000))
    expect = np.searchsorted(np.cumsum(leaves), masses, side="right")
    assert (serial == expect).mean() > 0.999         # ties at float boundaries aside


# ---------------------------------------------------------------------------- PER
def filled_per(n=40, capacity=64, alpha=0.6, beta=0.4, seed=0):
    rng = np.random.default_rng(seed)
    buf = rlox.PrioritizedReplayBuffer(capacity, obs_dim=3, act_dim=2, alpha=alpha, beta=beta)
    pri = rng.uniform(0.01, 5.0, n)
    buf.push_batch(**batch_of(range(n)), priorities=pri)
    return buf, pri


def test_per_samples_follow_p_alpha():
    scipy_stats = pytest.importorskip("scipy.stats")
    buf, pri = filled_per(n=40, alpha=0.6)
    idx = np.concatenate([buf.sample(1000, seed=s)["indices"] for s in range(100)])
    counts = np.bincount(idx, minlength=40)
    expected = ref.per_probabilities(pri, 0.6, buf.eps) * idx.size
    assert scipy_stats.chisquare(counts, expected).pvalue > 1e-4
    # the test has power: the same counts are far from p^1 and from uniform
    wrong = ref.per_probabilities(pri, 1.0, buf.eps) * idx.size
    assert scipy_stats.chisquare(counts, wrong).pvalue < 1e-12
    assert scipy_stats.chisquare(counts).pvalue < 1e-12


def test_per_is_weights_match_numpy_oracle():
    buf, pri = filled_per(n=40, alpha=0.7, beta=0.5)
    batch = buf.sample(256, seed=3)
    probs = ref.per_probabilities(pri, 0.7, buf.eps)
    np.testing.assert_allclose(batch["weights"], ref.is_weights(probs, batch["indices"], 0.5),
                               rtol=1e-5)
    assert batch["weights"].dtype == np.float32 and batch["weights"].max() <= 1.0
    assert_aligned(batch)
    # beta override and set_beta
    buf.set_beta(1.0)
    b2 = buf.sample(256, seed=3)
    np.testing.assert_allclose(b2["weights"], ref.is_weights(probs, b2["indices"], 1.0), rtol=1e-5)
    b3 = buf.sample(256, seed=3, beta=0.0)
    np.testing.assert_array_equal(b3["weights"], 1.0)
    np.testing.assert_allclose(buf.priorities(), (pri + buf.eps) ** 0.7, rtol=1e-6)  # powf leaves


def test_per_update_priorities_and_max_priority():
    buf, pri = filled_per(n=10, capacity=16)
    assert buf.max_priority == pytest.approx(pri.max())
    new = np.array([0.0, 2.0, 100.0])
    buf.update_priorities(np.array([1, 3, 3]), new)      # repeated index: last one wins
    leaves = (pri + buf.eps) ** buf.alpha
    leaves[1], leaves[3] = (0.0 + buf.eps) ** buf.alpha, (100.0 + buf.eps) ** buf.alpha
    np.testing.assert_allclose(buf.priorities(), leaves, rtol=1e-6)
    assert buf.max_priority == 100.0
    buf.push(**transition(10))                            # default: the running max
    assert buf.priorities([10])[0] == pytest.approx((100.0 + buf.eps) ** buf.alpha)
    buf.push(**transition(11), priority=0.5)
    assert buf.priorities([11])[0] == pytest.approx((0.5 + buf.eps) ** buf.alpha)
    # float32 TD errors and int32 indices are accepted
    buf.update_priorities(np.array([0], np.int32), np.array([1.5], np.float32))
    # the guide's call with the indices of a sample
    batch = buf.sample(32, seed=0)
    buf.update_priorities(batch["indices"], np.abs(np.random.default_rng(0).standard_normal(32)))


def test_per_bad_priorities_change_nothing():
    buf, _ = filled_per(n=10, capacity=16)
    before = buf.priorities()
    for idx, p, err, msg in [([0, 10], [1.0, 1.0], IndexError, "index 10 out of range"),
                             ([-1], [1.0], IndexError, "index -1 out of range"),
                             ([0, 1], [1.0, -2.0], ValueError, "finite and >= 0"),
                             ([0, 1], [np.nan, 1.0], ValueError, "finite and >= 0"),
                             ([0, 1], [np.inf, 1.0], ValueError, "finite and >= 0"),
                             ([0, 1], [1.0], ValueError, "1 priorities for 2"),
                             ([0.5], [1.0], TypeError, "integers")]:
        with pytest.raises(err, match=msg):
            buf.update_priorities(idx, p)
    np.testing.assert_array_equal(buf.priorities(), before)
    with pytest.raises(ValueError, match="priority must be finite and >= 0"):
        buf.push(**transition(0), priority=-1.0)
    with pytest.raises(ValueError, match="priorities must be finite"):
        buf.push_batch(**batch_of([0, 1]), priorities=[1.0, np.nan])
    assert len(buf) == 10
    for bad in (-0.1, 1.5, np.nan):
        with pytest.raises(ValueError, match="beta must be a number in"):
            buf.set_beta(bad)
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        rlox.PrioritizedReplayBuffer(4, obs_dim=3, alpha=-1)
    empty = rlox.PrioritizedReplayBuffer(4, obs_dim=3)
    with pytest.raises(ValueError, match="empty"):
        empty.sample(2)


def test_per_wraparound_replaces_priorities():
    buf = rlox.PrioritizedReplayBuffer(4, obs_dim=3, act_dim=2, alpha=1.0, eps=0.0)
    buf.push_batch(**batch_of(range(4)), priorities=[1, 2, 3, 4])
    buf.push_batch(**batch_of(range(4, 10)), priorities=[5, 6, 7, 8, 9, 10])
    ids = assert_aligned(all_live(buf))
    assert sorted(ids) == [6, 7, 8, 9]
    np.testing.assert_allclose(buf.priorities(), ids + 1.0)
    assert buf.sample(8, seed=0)["weights"].max() == pytest.approx(1.0)


def test_per_push_batch_equals_push():
    a = rlox.PrioritizedReplayBuffer(8, obs_dim=3, act_dim=2)
    b = rlox.PrioritizedReplayBuffer(8, obs_dim=3, act_dim=2)
    pri = np.linspace(0.1, 3, 11)
    a.push_batch(**batch_of(range(11)), priorities=pri)
    for i in range(11):
        b.push(**transition(i), priority=pri[i])
    np.testing.assert_array_equal(a.priorities(), b.priorities())
    for k in ref.FIELDS:
        np.testing.assert_array_equal(all_live(a)[k], all_live(b)[k])
    ba, bb = a.sample(32, seed=9), b.sample(32, seed=9)
    np.testing.assert_array_equal(ba["indices"], bb["indices"])
    np.testing.assert_array_equal(ba["weights"], bb["weights"])


def test_per_sample_thread_invariant(n_threads):
    buf, _ = filled_per(n=300, capacity=512)
    big = buf.sample(8192, seed=4)                   # parallel tree queries
    with kernel_threads(1):
        serial = buf.sample(8192, seed=4)
    np.testing.assert_array_equal(big["indices"], serial["indices"])
    np.testing.assert_array_equal(big["weights"], serial["weights"])


def test_per_save_load(tmp_path):
    buf, _ = filled_per(n=30, capacity=32)
    buf.update_priorities([0, 1], [7.0, 8.0])
    buf.save(tmp_path / "per.npz")
    back = rlox.PrioritizedReplayBuffer.load(tmp_path / "per.npz")
    assert (back.alpha, back.beta, back.eps, back.max_priority) == \
        (buf.alpha, buf.beta, buf.eps, buf.max_priority)
    np.testing.assert_array_equal(back.priorities(), buf.priorities())
    a, b = back.sample(64, seed=1), buf.sample(64, seed=1)
    np.testing.assert_array_equal(a["indices"], b["indices"])
    np.testing.assert_array_equal(a["weights"], b["weights"])
    with pytest.raises(ValueError, match="ReplayBuffer"):
        rlox.ReplayBuffer.load(tmp_path / "per.npz")


# ---------------------------------------------------------------------------- n-step
@st.composite
def nstep_cases(draw):
    stride = draw(st.integers(1, 3))
    cap = stride * draw(st.integers(1, 8))
    n_pushes = stride * draw(st.integers(1, 25))
    done = draw(st.lists(st.sampled_from([0, 0, 0, 1, 2]), min_size=n_pushes, max_size=n_pushes))
    return stride, cap, done, draw(st.integers(1, 6)), draw(st.sampled_from([0.0, 0.5, 0.99, 1.0]))


@given(nstep_cases())
def test_nstep_matches_oracle(case):
    stride, cap, done, n, gamma = case
    buf = rlox.ReplayBuffer(cap, obs_dim=1, act_dim=1)
    oracle = ref.RingOracle(cap)
    for i, d in enumerate(done):
        t = dict(obs=[i], action=[0.0], reward=float(i % 7) - 2.0, terminated=d == 1,
                 truncated=d == 2, next_obs=[i + 1])
        buf.push(**t)
        oracle.push(**t)
    idx = np.arange(len(buf))
    ret, boot, disc = rlox.compute_nstep_targets(buf, idx, n=n, gamma=gamma, stride=stride)
    rew, te, tr = (oracle.field(k) for k in ("rewards", "terminated", "truncated"))
    newest = (oracle.pos - 1) % cap
    for k, s in enumerate(idx):
        g, b, dd = ref.nstep(rew, te, tr, newest, cap, s, n, gamma, stride)
        assert boot[k] == b
        assert ret[k] == pytest.approx(g, rel=1e-5, abs=1e-5)
        assert disc[k] == pytest.approx(dd, rel=1e-6)
    assert ret.dtype == np.float32 and boot.dtype == np.int64 and disc.dtype == np.float32


def test_nstep_episode_ends_and_seam():
    buf = rlox.ReplayBuffer(6, obs_dim=1, act_dim=1)
    # rewards 1..8; step 2 terminated, step 5 truncated; 8 pushes wrap a ring of 6
    for i in range(8):
        buf.push([i], 0.0, float(i + 1), i == 2, i == 5, [i + 1])
    slot = {i: i % 6 for i in range(2, 8)}           # live transitions 2..7
    ret, boot, disc = rlox.compute_nstep_targets(buf, [slot[3], slot[2], slot[6], slot[7]],
                                                 n=3, gamma=0.5)
    # from 3: r4 + .5 r5 + .25 r6, truncated at 5 -> bootstrap from next_obs of 5, gamma^3
    assert ret[0] == pytest.approx(4 + 0.5 * 5 + 0.25 * 6) and boot[0] == slot[5]
    assert disc[0] == pytest.approx(0.125)
    # from 2: terminated at once -> r3, no bootstrap
    assert ret[1] == pytest.approx(3) and disc[1] == 0.0
    # from 6: 7 is the newest -> stops there (never wraps onto the oldest, 2)
    assert ret[2] == pytest.approx(7 + 0.5 * 8) and boot[2] == slot[7] and disc[2] == 0.25
    assert ret[3] == pytest.approx(8) and boot[3] == slot[7] and disc[3] == 0.5
    g = buf.gather(boot, fields=("next_obs",))["next_obs"][:, 0]
    np.testing.assert_array_equal(g, [6, 3, 8, 8])
    # the same from plain arrays (time order, index T-1 newest)
    r, te, tr = np.arange(1.0, 9.0), np.arange(8) == 2, np.arange(8) == 5
    ret2, boot2, disc2 = rlox.compute_nstep_targets((r, te, tr), [3, 2, 6, 7], n=3, gamma=0.5)
    np.testing.assert_allclose(ret2, ret)
    np.testing.assert_array_equal(boot2, [5, 2, 7, 7])
    np.testing.assert_array_equal(disc2, disc)
    d = rlox.compute_nstep_targets({"rewards": r, "terminated": te, "truncated": tr}, [0], 1, 0.9)
    assert d[0][0] == 1.0 and d[1][0] == 0 and d[2][0] == pytest.approx(0.9)


def test_nstep_bad_input():
    buf = rlox.ReplayBuffer(6, obs_dim=1, act_dim=1)
    with pytest.raises(ValueError, match="empty"):
        rlox.compute_nstep_targets(buf, [0], 3, 0.9)
    buf.push([0], 0.0, 1.0, False, False, [1])
    with pytest.raises(IndexError, match="index 1 out of range"):
        rlox.compute_nstep_targets(buf, [1], 3, 0.9)
    with pytest.raises(ValueError, match="n must be >= 1"):
        rlox.compute_nstep_targets(buf, [0], 0, 0.9)
    with pytest.raises(ValueError, match="gamma must be a number in"):
        rlox.compute_nstep_targets(buf, [0], 3, 1.5)
    with pytest.raises(ValueError, match="stride=4 must divide the buffer capacity 6"):
        rlox.compute_nstep_targets(buf, [0], 3, 0.9, stride=4)
    with pytest.raises(KeyError, match="truncated"):
        rlox.compute_nstep_targets({"rewards": [1.0], "terminated": [0]}, [0], 3, 0.9)
    with pytest.raises(TypeError, match="source must be"):
        rlox.compute_nstep_targets(np.zeros(3), [0], 3, 0.9)


def test_nstep_thread_invariant(n_threads):
    rng = np.random.default_rng(2)
    T = 6000
    r, te, tr = rng.standard_normal(T), rng.random(T) < 0.05, rng.random(T) < 0.02
    idx = rng.integers(0, T, 8000)
    out = rlox.compute_nstep_targets((r, te, tr), idx, 5, 0.97)
    with kernel_threads(1):
        serial = rlox.compute_nstep_targets((r, te, tr), idx, 5, 0.97)
    for a, b in zip(out, serial):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------- large rows
def test_large_rows_parallel_gather_thread_invariant(n_threads):
    buf = rlox.ReplayBuffer(600, obs_dim=2048, act_dim=1, seed=0)   # 16 KiB rows
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((600, 2048)).astype(np.float32)
    buf.push_batch(obs, np.arange(600), np.zeros(600), np.zeros(600), np.zeros(600), obs * 2)
    batch = buf.sample(512, seed=1)                  # 16 MiB moved: the parallel path
    np.testing.assert_array_equal(batch["obs"], obs[batch["indices"]])
    np.testing.assert_array_equal(batch["next_obs"], 2 * obs[batch["indices"]])
    with kernel_threads(1):
        serial = buf.sample(512, seed=1)
    np.testing.assert_array_equal(batch["obs"], serial["obs"])


# ---------------------------------------------------------------------------- MmapReplayBuffer
def mmap_buf(path, hot=4, total=10, **kw):
    return rlox.MmapReplayBuffer(hot_capacity=hot, total_capacity=total, obs_dim=3, act_dim=2,
                                 cold_path=str(path), **kw)


@pytest.mark.parametrize("batched", [False, True])
def test_mmap_holds_the_newest_total_capacity(tmp_path, batched):
    buf = mmap_buf(tmp_path / "cold.bin")
    if batched:
        for lo, hi in [(0, 3), (3, 9), (9, 10), (10, 27)]:
            buf.push_batch(**batch_of(range(lo, hi)))
    else:
        for i in range(27):
            buf.push(**transition(i))
    assert len(buf) == 10 and buf.capacity == 10 and buf.n_spilled == 6
    ids = assert_aligned(all_live(buf))
    assert sorted(ids) == list(range(17, 27))
    assert sorted(ids[:4]) == list(range(23, 27))   # hot part: the newest hot_capacity
    batch = buf.sample(200, seed=0)
    assert set(assert_aligned(batch)) == set(range(17, 27))
    np.testing.assert_array_equal(batch["obs"], buf.sample(200, seed=0)["obs"])
    buf.close()


def test_mmap_push_batch_equals_push(tmp_path):
    a, b = mmap_buf(tmp_path / "a.bin", 3, 8), mmap_buf(tmp_path / "b.bin", 3, 8)
    a.push_batch(**batch_of(range(13)))
    for i in range(13):
        b.push(**transition(i))
    for k in ref.FIELDS:
        np.testing.assert_array_equal(all_live(a)[k], all_live(b)[k])


def test_mmap_reopen_same_process(tmp_path):
    path = tmp_path / "cold.bin"
    with mmap_buf(path, seed=3) as buf:
        buf.push_batch(**batch_of(range(15)))
        expect = all_live(buf)
    assert buf.closed
    with pytest.raises(ValueError, match="closed"):
        buf.sample(2)
    back = rlox.MmapReplayBuffer.open(path)
    assert len(back) == 10 and back.hot_capacity == 4 and back.total_capacity == 10
    for k in ref.FIELDS:
        np.testing.assert_array_equal(all_live(back)[k], expect[k])
    back.push(**transition(15))                       # and it keeps going
    assert sorted(assert_aligned(all_live(back))) == list(range(6, 16))
    back.close()
    again = mmap_buf(path, resume=True)
    assert sorted(assert_aligned(all_live(again))) == list(range(6, 16))
    again.close()


def test_mmap_round_trip_across_processes(tmp_path):
    path = tmp_path / "shared.bin"
    script = textwrap.dedent(f"""
        import numpy as np, rlox
        buf = rlox.MmapReplayBuffer(hot_capacity=16, total_capacity=64, obs_dim=84 * 84 * 4,
                                    act_dim=1, cold_path={str(path)!r}, obs_dtype=np.uint8)
        for i in range(50):
            frame = np.full(84 * 84 * 4, i, np.uint8)
            buf.push(frame, float(i), float(i), i % 10 == 9, False, frame + 1)
        buf.close()
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO, timeout=120)
    buf = rlox.MmapReplayBuffer.open(path)
    assert len(buf) == 50 and buf.obs_dtype == np.uint8 and buf.n_spilled == 34
    batch = buf.sample(64, seed=0)
    i = batch["actions"][:, 0].astype(np.uint8)
    assert batch["obs"].dtype == np.uint8
    np.testing.assert_array_equal(batch["obs"], np.repeat(i[:, None], 84 * 84 * 4, 1))
    np.testing.assert_array_equal(batch["next_obs"], batch["obs"] + 1)
    np.testing.assert_array_equal(batch["rewards"], i)
    np.testing.assert_array_equal(batch["terminated"], (i % 10 == 9))
    assert i.min() < 34 <= i.max()                   # draws from the file and from memory
    assert set(buf.gather(np.arange(50))["rewards"].astype(int)) == set(range(50))
    buf.close()


def test_mmap_unflushed_file_reopens_with_cold_part(tmp_path):
    path = tmp_path / "cold.bin"
    buf = mmap_buf(path)
    buf.push_batch(**batch_of(range(12)))             # 8 spilled, 4 in memory, no flush
    del buf
    with pytest.warns(RloxWarning, match="in-memory transitions of that run are lost"):
        back = rlox.MmapReplayBuffer.open(path)
    assert len(back) == 6 and back.n_spilled == 6
    assert sorted(assert_aligned(all_live(back))) == list(range(2, 8))
    back.close()


def test_mmap_incompatible_files(tmp_path):
    path = tmp_path / "cold.bin"
    mmap_buf(path).close()
    with pytest.raises(ValueError, match=r"incompatible.*obs_shape: file has \[3\], requested \[5\]"):
        rlox.MmapReplayBuffer(4, 10, obs_dim=5, act_dim=2, cold_path=str(path), resume=True)
    with pytest.raises(ValueError, match="hot_capacity: file has 4, requested 5"):
        mmap_buf(path, hot=5, resume=True)
    raw = bytearray(path.read_bytes())
    bad_version = tmp_path / "v.bin"
    bad_version.write_bytes(bytes(raw[:8]) + (99).to_bytes(4, "little") + bytes(raw[12:]))
    with pytest.raises(ValueError, match="format version 99"):
        rlox.MmapReplayBuffer.open(bad_version)
    garbage = tmp_path / "g.bin"
    garbage.write_bytes(os.urandom(8192))
    with pytest.raises(ValueError, match="not an rlox MmapReplayBuffer file"):
        rlox.MmapReplayBuffer.open(garbage)
    short = tmp_path / "short.bin"
    short.write_bytes(bytes(raw[:5000]))
    with pytest.raises(ValueError, match="truncated"):
        rlox.MmapReplayBuffer.open(short)
    with pytest.raises(OSError, match="cannot open"):
        rlox.MmapReplayBuffer.open(tmp_path / "missing.bin")


def test_mmap_bad_construction(tmp_path):
    with pytest.raises(OSError, match="cannot create its cold file"):
        mmap_buf(tmp_path / "no" / "such" / "dir" / "cold.bin")
    with pytest.raises(ValueError, match="total_capacity .* must be >= hot_capacity"):
        mmap_buf(tmp_path / "c.bin", hot=8, total=4)
    with pytest.raises(TypeError, match="cold_path"):
        rlox.MmapReplayBuffer(4, 8, obs_dim=3)
    with pytest.raises(TypeError, match="persists itself"):
        mmap_buf(tmp_path / "d.bin").save(tmp_path / "x.npz")
    with pytest.raises(TypeError, match="MmapReplayBuffer"):
        rlox.compute_nstep_targets(mmap_buf(tmp_path / "e.bin"), [0], 3, 0.9)


def test_mmap_guide_sample(tmp_path):
    mmap = rlox.MmapReplayBuffer(hot_capacity=16, total_capacity=64, obs_dim=84 * 84 * 4,
                                 act_dim=1, cold_path=str(tmp_path / "replay_cold.bin"))
    frame = np.zeros(84 * 84 * 4, dtype=np.float32)
    for i in range(40):
        mmap.push(frame, action=np.array([0.0], np.float32), reward=float(i), terminated=False,
                  truncated=False, next_obs=frame)
    assert len(mmap) == 40
    batch = mmap.sample(batch_size=8, seed=0)
    assert batch["obs"].shape == (8, 84 * 84 * 4) and batch["obs"].dtype == np.float32
    mmap.clear()
    assert len(mmap) == 0
    mmap.close()


# ---------------------------------------------------------------------------- ExperienceTable
def test_experience_table():
    table = rlox.ExperienceTable(obs_dim=6, act_dim=1)
    assert len(table) == 0 and table.observations().shape == (0, 6)
    for i in range(1500):                             # grows past the first allocation
        table.push(np.full(6, i, np.float32), i, float(i), i % 100 == 99, False)
    early = table.rewards()
    table.push_batch(np.zeros((3, 6)), np.ones(3), [1.0, 2.0, 3.0], [0, 0, 1], [1, 0, 0])
    assert len(table) == 1503
    cols = table.columns()
    assert cols["obs"].shape == (1503, 6) and cols["actions"].shape == (1503, 1)
    np.testing.assert_array_equal(cols["obs"][:1500, 0], np.arange(1500))
    np.testing.assert_array_equal(cols["rewards"][-3:], [1, 2, 3])
    np.testing.assert_array_equal(cols["terminated"][-3:], [0, 0, 1])
    np.testing.assert_array_equal(cols["truncated"][-3:], [1, 0, 0])
    assert cols["terminated"][:1500].sum() == 15
    assert not cols["obs"].flags.writeable
    table.clear()
    assert len(table) == 0
    table.push(np.zeros(6), 0.0, 5.0, False)
    np.testing.assert_array_equal(early, np.arange(1500))   # old views keep their data
    np.testing.assert_array_equal(table.rewards(), [5.0])
    with pytest.raises(ValueError, match=r"obs has shape \(4,\), expected \(6,\)"):
        table.push(np.zeros(4), 0.0, 0.0, False)
    with pytest.raises(ValueError, match=r"obs has shape \(2, 5\), expected \(2, 6\)"):
        table.push_batch(np.zeros((2, 5)), np.zeros(2), np.zeros(2), np.zeros(2))


# ---------------------------------------------------------------------------- exports
def test_public_names():
    import rlox.buffers
    for name in rlox.buffers.__all__:
        assert getattr(rlox, name) is getattr(rlox.buffers, name)
    assert {"ReplayBuffer", "PrioritizedReplayBuffer", "MmapReplayBuffer", "ExperienceTable",
            "OfflineDatasetBuffer", "compute_nstep_targets"} <= set(rlox.__all__)
