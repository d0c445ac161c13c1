"""Replay buffers vs SB3, cpprb and TorchRL, side by side.

    .venv/bin/python benchmarks/bench_buffers.py

Cases: single pushes (obs_dim 4 float32, and Atari-sized 84*84*4 uint8), push_batch of 1024,
uniform sample(256) / sample(1024) from a full 1M buffer, PER sample(256) and
update_priorities(256) on 1M. Each peer is skipped, with a note, when it is not installed.
What each call returns differs: rlox and cpprb return NumPy arrays, SB3 returns torch tensors
(its sample copies into them), TorchRL a TensorDict; the row "rlox + torch.from_numpy" adds the
zero-copy conversion a torch user makes.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, Table, header, measure  # noqa: E402

import rlox  # noqa: E402

BIG = 100_000 if QUICK else 1_000_000
ATARI = 84 * 84 * 4
N_PUSH = 10_000            # single pushes per timed call (the anchor's 10k)
N_PUSH_ATARI = 1_000


def peer(name):
    """Import a peer, or print why it is skipped and return None."""
    try:
        if name == "sb3":
            import gymnasium as gym
            from stable_baselines3.common.buffers import ReplayBuffer
            return ReplayBuffer, gym
        if name == "cpprb":
            import cpprb
            return cpprb
        if name == "torchrl":
            import torch
            from tensordict import TensorDict
            from torchrl.data import LazyTensorStorage, ReplayBuffer
            return torch, TensorDict, LazyTensorStorage, ReplayBuffer
    except Exception as e:  # ImportError, or a peer that fails to load
        print(f"  {name} unavailable ({type(e).__name__}: {e}); skipping it "
              f"(pip install '.[bench]')")
        return None


SB3, CPPRB, TRL = peer("sb3"), peer("cpprb"), peer("torchrl")


def sb3_buffer(capacity, obs_dim, dtype, n_envs=1):
    ReplayBuffer, gym = SB3
    high = 255 if dtype == np.uint8 else 1.0
    obs_space = gym.spaces.Box(0, high, (obs_dim,), dtype)
    act_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # SB3's memory-availability warning
        return ReplayBuffer(capacity, obs_space, act_space, device="cpu", n_envs=n_envs)


def cpprb_env(obs_dim, dtype):
    return {"obs": {"shape": obs_dim, "dtype": dtype}, "act": {"shape": 1}, "rew": {},
            "next_obs": {"shape": obs_dim, "dtype": dtype}, "done": {}}


def trl_buffer(capacity, batch_size=None):
    torch, TensorDict, LazyTensorStorage, ReplayBuffer = TRL
    import logging
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    return ReplayBuffer(storage=LazyTensorStorage(capacity), batch_size=batch_size)


def trl_batch(obs, act, rew, done, next_obs):
    torch, TensorDict, *_ = TRL
    t = torch.from_numpy
    shape = [] if np.ndim(rew) == 0 else [len(rew)]
    return TensorDict({"obs": t(obs), "action": t(act), "reward": torch.as_tensor(rew),
                       "done": torch.as_tensor(done), "next_obs": t(next_obs)}, batch_size=shape)


# ------------------------------------------------------------------------------------- push
def bench_single_push(table):
    header(f"push one at a time ({N_PUSH // 1000}k pushes per call, obs_dim 4 float32, "
           f"steady state)")
    obs, nxt = np.zeros(4, np.float32), np.ones(4, np.float32)
    act = np.array([0.5], np.float32)
    cap = N_PUSH                    # each timed call overwrites the whole (already filled) ring
    buf = rlox.ReplayBuffer(cap, obs_dim=4, act_dim=1)

    def rlox_push():
        for _ in range(N_PUSH):
            buf.push(obs, action=act, reward=1.0, terminated=False, truncated=False,
                     next_obs=nxt)
    rlox_push()
    t_rlox = measure(rlox_push)
    case = f"push x{N_PUSH // 1000}k, obs_dim 4"
    if SB3:
        sb = sb3_buffer(cap, 4, np.float32)
        o2, n2, a2 = obs[None], nxt[None], act[None]
        r2, d2, infos = np.array([1.0]), np.array([0.0]), [{}]

        def sb3_push():
            for _ in range(N_PUSH):
                sb.add(o2, n2, a2, r2, d2, infos)
        sb3_push()
        table.add(case, rlox=t_rlox, peer=measure(sb3_push, repeats=3), peer_name="SB3", goal=4)
    if CPPRB:
        cb = CPPRB.ReplayBuffer(cap, cpprb_env(4, np.float32))

        def cpprb_push():
            for _ in range(N_PUSH):
                cb.add(obs=obs, act=act, rew=1.0, next_obs=nxt, done=0.0)
        cpprb_push()
        table.add(case, rlox=t_rlox, peer=measure(cpprb_push, repeats=3), peer_name="cpprb")
    if TRL:
        rb = trl_buffer(cap)
        td = trl_batch(obs, act, np.float32(1.0), False, nxt)

        def trl_push():
            for _ in range(N_PUSH):
                rb.add(td)
        trl_push()
        table.add(case, rlox=t_rlox, peer=measure(trl_push, repeats=2, min_time=0.5),
                  peer_name="TorchRL LazyTensorStorage")


def bench_atari_push(table):
    header(f"push one at a time, Atari-sized 84*84*4 uint8 ({N_PUSH_ATARI} pushes per call, "
           f"steady state)")
    # Every buffer is filled once before timing: the ring is then overwritten in memory that is
    # already mapped, as in a long run. (Timing the first fill instead measures the kernel
    # zeroing fresh pages for the lazily allocated buffers, rlox's and SB3's, while cpprb
    # zeroes its memory at construction.)
    cap = 2_000
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (8, ATARI), dtype=np.uint8)
    act = np.array([1.0], np.float32)
    buf = rlox.ReplayBuffer(cap, obs_dim=ATARI, act_dim=1, obs_dtype=np.uint8)

    def rlox_push():
        for i in range(N_PUSH_ATARI):
            buf.push(frames[i & 7], action=act, reward=1.0, terminated=False, truncated=False,
                     next_obs=frames[(i + 1) & 7])
    for _ in range(cap // N_PUSH_ATARI + 1):
        rlox_push()
    t_rlox = measure(rlox_push, repeats=3)
    case = f"push x{N_PUSH_ATARI}, obs 84*84*4 uint8"
    if SB3:
        sb = sb3_buffer(cap, ATARI, np.uint8)
        f2 = frames[:, None, :]
        a2, r2, d2, infos = act[None], np.array([1.0]), np.array([0.0]), [{}]

        def sb3_push():
            for i in range(N_PUSH_ATARI):
                sb.add(f2[i & 7], f2[(i + 1) & 7], a2, r2, d2, infos)
        for _ in range(cap // N_PUSH_ATARI + 1):
            sb3_push()
        table.add(case, rlox=t_rlox, peer=measure(sb3_push, repeats=3), peer_name="SB3",
                  goal=1, note="buffers filled first; the Rust rlox lost here (0.8x)")
    if CPPRB:
        cb = CPPRB.ReplayBuffer(cap, cpprb_env(ATARI, np.ubyte))

        def cpprb_push():
            for i in range(N_PUSH_ATARI):
                cb.add(obs=frames[i & 7], act=act, rew=1.0, next_obs=frames[(i + 1) & 7], done=0.0)
        for _ in range(cap // N_PUSH_ATARI + 1):
            cpprb_push()
        table.add(case, rlox=t_rlox, peer=measure(cpprb_push, repeats=3), peer_name="cpprb")
    if TRL:
        rb = trl_buffer(cap)
        tds = [trl_batch(frames[i], act, np.float32(1.0), False, frames[(i + 1) & 7])
               for i in range(8)]

        def trl_push():
            for i in range(N_PUSH_ATARI):
                rb.add(tds[i & 7])
        for _ in range(cap // N_PUSH_ATARI + 1):
            trl_push()
        table.add(case, rlox=t_rlox, peer=measure(trl_push, repeats=2),
                  peer_name="TorchRL LazyTensorStorage")


def bench_push_batch(table):
    header("push_batch of 1024 transitions (obs_dim 4 float32)")
    n = 1024
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((n, 4)).astype(np.float32)
    nxt = rng.standard_normal((n, 4)).astype(np.float32)
    act = rng.standard_normal((n, 1)).astype(np.float32)
    rew = rng.standard_normal(n).astype(np.float32)
    done = np.zeros(n, np.float32)
    buf = rlox.ReplayBuffer(100_000, obs_dim=4, act_dim=1)
    t_rlox = measure(lambda: buf.push_batch(obs, act, rew, done, done, nxt))
    case = "push_batch 1024"
    if SB3:
        sb = sb3_buffer(100, 4, np.float32, n_envs=n)   # a 1024-env step is SB3's batch add
        infos = [{}] * n
        table.add(case, rlox=t_rlox, peer=measure(lambda: sb.add(obs, nxt, act, rew, done, infos)),
                  peer_name="SB3 (n_envs=1024 add)")
    if CPPRB:
        cb = CPPRB.ReplayBuffer(100_000, cpprb_env(4, np.float32))
        table.add(case, rlox=t_rlox,
                  peer=measure(lambda: cb.add(obs=obs, act=act, rew=rew, next_obs=nxt, done=done)),
                  peer_name="cpprb")
    if TRL:
        rb = trl_buffer(100_000)
        td = trl_batch(obs, act, rew, done.astype(bool), nxt)
        table.add(case, rlox=t_rlox, peer=measure(lambda: rb.extend(td)),
                  peer_name="TorchRL LazyTensorStorage")


# ------------------------------------------------------------------------------------- sample
def full_data(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32), (rng.random(n) < 0.01).astype(np.float32),
            rng.standard_normal((n, 4)).astype(np.float32))


def bench_sample(table):
    header(f"sample from a full {BIG:,} buffer (obs_dim 4 float32)")
    obs, act, rew, done, nxt = full_data(BIG)
    buf = rlox.ReplayBuffer(BIG, obs_dim=4, act_dim=1)
    buf.push_batch(obs, act, rew, done, np.zeros_like(done), nxt)
    sb = cb = rb = None
    if SB3:
        sb = sb3_buffer(BIG, 4, np.float32)
        sb.observations[:, 0], sb.next_observations[:, 0] = obs, nxt
        sb.actions[:, 0], sb.rewards[:, 0], sb.dones[:, 0] = act, rew, done
        sb.full = True
    if CPPRB:
        cb = CPPRB.ReplayBuffer(BIG, cpprb_env(4, np.float32))
        cb.add(obs=obs, act=act, rew=rew, next_obs=nxt, done=done)
    if TRL:
        rb = trl_buffer(BIG)
        rb.extend(trl_batch(obs, act, rew, done.astype(bool), nxt))
    import torch

    for bs in (256, 1024):
        case = f"sample({bs}) from {BIG // 1000}k"
        t_rlox = measure(lambda: buf.sample(bs))
        if sb is not None:
            t_sb = measure(lambda: sb.sample(bs), repeats=3)
            table.add(case, rlox=t_rlox, peer=t_sb, peer_name="SB3 (returns torch)", goal=5)

            def rlox_torch():
                return {k: torch.from_numpy(v) for k, v in buf.sample(bs).items()}
            table.add(case + " + torch.from_numpy", rlox=measure(rlox_torch), peer=t_sb,
                      peer_name="SB3 (returns torch)")
        if cb is not None:
            table.add(case, rlox=t_rlox, peer=measure(lambda: cb.sample(bs)), peer_name="cpprb",
                      goal=1)
        if rb is not None:
            table.add(case, rlox=t_rlox, peer=measure(lambda: rb.sample(bs), repeats=3),
                      peer_name="TorchRL LazyTensorStorage")


def bench_per(table):
    header(f"prioritized replay on {BIG:,} (alpha 0.6, beta 0.4)")
    obs, act, rew, done, nxt = full_data(BIG, seed=1)
    rng = np.random.default_rng(2)
    pri = rng.uniform(0.01, 2.0, BIG)
    buf = rlox.PrioritizedReplayBuffer(BIG, obs_dim=4, act_dim=1, alpha=0.6, beta=0.4)
    buf.push_batch(obs, act, rew, done, np.zeros_like(done), nxt, priorities=pri)
    # Fresh TD errors on every call, as in training: cycling through 64 batches matters because
    # cpprb stops walking up its trees when a node does not change, so re-sending the same
    # priorities would cost it only the leaf writes.
    batches = [(rng.integers(0, BIG, 256), np.abs(rng.standard_normal(256)) + 1e-6)
               for _ in range(64)]

    def cycling(update):
        state = [0]

        def call():
            state[0] = (state[0] + 1) & 63
            update(*batches[state[0]])
        return call
    t_s = measure(lambda: buf.sample(256))
    t_u = measure(cycling(buf.update_priorities))
    cpprb_s = cpprb_u = None
    if CPPRB:
        per = CPPRB.PrioritizedReplayBuffer(BIG, cpprb_env(4, np.float32), alpha=0.6)
        per.add(obs=obs, act=act, rew=rew, next_obs=nxt, done=done, priorities=pri)
        cpprb_s = measure(lambda: per.sample(256, beta=0.4))
        cpprb_u = measure(cycling(per.update_priorities))
    note = ""
    if TRL:
        torch, TensorDict, LazyTensorStorage, _ = TRL
        from torchrl.data import PrioritizedReplayBuffer
        try:
            PrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(8))
        except Exception as e:
            note = f"TorchRL PER unavailable: {type(e).__name__} ({str(e)[:60]})"
            print(f"  {note}: its C++ extension does not load with this torch")
    table.add("PER sample(256)", rlox=t_s, peer=cpprb_s, peer_name="cpprb (C++ trees)", goal=1,
              note=note)
    table.add("PER update_priorities(256)", rlox=t_u, peer=cpprb_u,
              peer_name="cpprb (C++ trees)", goal=1, note="fresh priorities on every call")


def main():
    table = Table("buffers", "Replay buffers vs SB3, cpprb and TorchRL")
    bench_single_push(table)
    bench_atari_push(table)
    bench_push_batch(table)
    bench_sample(table)
    bench_per(table)
    table.finish()


if __name__ == "__main__":
    main()
