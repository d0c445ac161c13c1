"""Learning from pixels: Atari preprocessing and PPO training throughput, rlox vs Stable-Baselines3.

1. Preprocessing: env steps/s of one Breakout env under rlox's ``AtariWrapper`` and under SB3's
   ``AtariWrapper`` + a 4-frame stack (both on ``ALE/Breakout-v5`` made with ``frameskip=1``:
   4 ALE frames, max-pool, 84x84 gray, stack per step), random actions.
2. Frame preprocessing (``--sections frames``; table ``pixels_frames``): microseconds per frame of
   rlox's frame kernel (``rlox._ext.frames``: max-pool, RGB2GRAY, INTER_AREA 210x160 -> 84x84
   in one pass into the frame-stack slot) against the OpenCV calls it replaces
   (``np.maximum`` + ``cv2.cvtColor`` + ``cv2.resize`` + the copy into the slot), one frame on
   one thread and N=8 envs' frames on 2 threads (OpenCV's own thread pool at 2 threads, the
   kernel's prange at 2); then ``AtariWrapper`` steps/s with the kernel and with its OpenCV
   path (``use_frame_kernel=False``), in interleaved rounds.
3. PPO training: steps/s of PPO with the RL Zoo Atari preset (8 envs x 128 steps, 4 epochs of
   batch 256, NatureCNN) on ``ALE/Pong-v5``: rlox ``Trainer("ppo", env="ALE/Pong-v5")`` against
   SB3's ``PPO("CnnPolicy")`` on ``make_atari_env`` + ``VecFrameStack(4)`` with the same
   hyperparameters. Goal (issue 15): >= 2x SB3.
4. SAC from pixels (``--sections sac``, its own table ``pixels_sac``): env steps/s of SAC with a
   NatureCNN on a synthetic 3x64x64 uint8 task (a bar whose column sets the target action), rlox
   against SB3's ``SAC("CnnPolicy")``, same hyperparameters (batch 256, 256-256 MLPs, buffer 10k,
   one gradient step per env step). SB3's default gives actor and critics a CNN each
   (``share_features_extractor=False``), compared with rlox's ``share_encoder=False``; rlox's
   default (the critics' encoder, detached for the actor) is a second row against the same SB3 run.

Contestants run in interleaved rounds in one process, one torch thread each, so load from other
work on the machine falls on both; the table gives the median of the rounds.

    .venv/bin/python benchmarks/bench_pixels.py [--rounds 3] [--steps 2048] [--sections frames atari sac]
    .venv/bin/python benchmarks/bench_pixels.py --sections frames --rounds 5
    .venv/bin/python benchmarks/bench_pixels.py --sections sac --rounds 3 --sac-steps 400
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# Before torch loads the OpenMP runtime (rlox sets this on import, but torch comes first here):
# spinning workers on a busy machine turn a 2-thread prange of 300 us into milliseconds.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, Table, header, measure  # noqa: E402

GAME = "ALE/Pong-v5"
PPO_HP = dict(n_steps=128, batch_size=256, n_epochs=4, learning_rate=2.5e-4, clip_range=0.1, ent_coef=0.01,
              vf_coef=0.5)


def _wrapper_sps(kind: str, steps: int, clock=time.perf_counter) -> float:
    import gymnasium as gym

    from rlox.wrappers.visual import AtariWrapper, make_atari

    if kind in ("rlox", "rlox-cv2"):
        env = AtariWrapper(make_atari("ALE/Breakout-v5"))
        env.use_frame_kernel = kind == "rlox"
    else:
        from stable_baselines3.common.atari_wrappers import AtariWrapper as SB3Atari

        env = gym.wrappers.FrameStackObservation(SB3Atari(make_atari("ALE/Breakout-v5")), 4)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    t0 = clock()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            env.reset()
    return steps / (clock() - t0)


def _rlox_ppo_sps(steps: int) -> float:
    from rlox import Trainer

    trainer = Trainer("ppo", env=GAME, seed=0)           # the zoo's Atari preset, AtariWrapper, NatureCNN
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.train(total_timesteps=steps)
    return steps / (time.perf_counter() - t0), steps / (time.process_time() - c0)


def _sb3_ppo_sps(steps: int) -> float:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    venv = VecFrameStack(make_atari_env(GAME, n_envs=8, seed=0, env_kwargs={"frameskip": 1}), n_stack=4)
    model = PPO("CnnPolicy", venv, seed=0, device="cpu", verbose=0, **PPO_HP)
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps)
    return steps / (time.perf_counter() - t0), steps / (time.process_time() - c0)


def _cnn_floor_sps(channels_last: bool, reps: int = 2) -> float:
    """Env steps/s of one PPO iteration (8 envs x 128 steps) if it were nothing but its NatureCNN
    compute: 128 forwards of batch 8 (collection) and 16 forward+backward+Adam steps of batch 256
    with policy and value heads (4 epochs x 4 minibatches), on preallocated uint8 frames. No env,
    no sampling, no GAE, no Python bookkeeping: a library at this rate is bound by the CNN alone."""
    import gymnasium as gym

    from rlox.cnn import NatureCNN

    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    net, pi, vf = NatureCNN(space), torch.nn.Linear(512, 6), torch.nn.Linear(512, 1)
    inp = net.inp.forward
    if not channels_last:        # SB3's layout: NCHW activations
        net.inp.forward = lambda o: inp(o).contiguous()
    opt = torch.optim.Adam([*net.parameters(), *pi.parameters(), *vf.parameters()], lr=2.5e-4)
    frames = torch.randint(0, 256, (256, 4, 84, 84), dtype=torch.uint8)
    times = []
    for _ in range(reps + 1):
        t0 = time.process_time()
        with torch.no_grad():
            for _ in range(128):
                f = net(frames[:8])
                pi(f), vf(f)
        for _ in range(16):
            f = net(frames)
            loss = pi(f).logsumexp(-1).mean() + vf(f).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        times.append(time.process_time() - t0)
    return 1024 / float(np.median(times[1:]))


def _rollout_obs_memory(n_envs: int = 8, n_steps: int = 128) -> tuple[float, float]:
    """Peak bytes (tracemalloc; NumPy and torch CPU tensors from NumPy report to it) of one PPO
    rollout's collection on ALE/Breakout-v5 (AtariWrapper, (4, 84, 84) uint8) with a NatureCNN
    policy: observations kept uint8 (rlox's default for CNN policies) and as float32."""
    import tracemalloc

    from rlox.collectors import RolloutCollector
    from rlox.policies import make_policy

    peaks = []
    for uint8 in (True, False):
        col = RolloutCollector("ALE/Breakout-v5", n_envs=n_envs, seed=0)
        col._uint8_images = uint8
        pol = make_policy(col.observation_space, col.action_space)
        col.reset()
        tracemalloc.start()
        batch = col.collect(pol, n_steps=n_steps, generator=torch.Generator().manual_seed(0))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert batch.obs.dtype == (torch.uint8 if uint8 else torch.float32)
        col.close()
    return peaks[0], peaks[1]


def _frames_section(rounds: int, wrapper_steps: int) -> None:
    """Per-frame time of the frame kernel vs the OpenCV calls it replaces, and AtariWrapper with each."""
    import cv2

    import rlox
    from rlox._ext import frames as F

    table = Table("pixels_frames", "Frame preprocessing: rlox's frame kernel vs OpenCV, per frame")
    rng = np.random.default_rng(0)
    gray = rng.integers(0, 256, (2, 8, 210, 160), dtype=np.uint8)        # [last/prev, env, H, W]
    rgb = rng.integers(0, 256, (2, 8, 210, 160, 3), dtype=np.uint8)
    stack = np.zeros((4, 84, 84), np.uint8)
    colour = np.zeros((84, 84, 3), np.uint8)
    out8 = np.zeros((8, 84, 84), np.uint8)
    area, to_gray = cv2.INTER_AREA, cv2.COLOR_RGB2GRAY

    def cv2_gray():          # AtariWrapper's OpenCV path: ALE gray screens
        stack[-1] = cv2.resize(np.maximum(gray[1, 0], gray[0, 0]), (84, 84), interpolation=area)

    def cv2_rgb():           # SB3's MaxAndSkip + WarpFrame on RGB screens
        stack[-1] = cv2.resize(cv2.cvtColor(np.maximum(rgb[1, 0], rgb[0, 0]), to_gray), (84, 84),
                               interpolation=area)

    def cv2_colour():        # ImagePreprocess(grayscale=False)
        colour[...] = cv2.resize(rgb[0, 0], (84, 84), interpolation=area)

    stacked = np.ascontiguousarray(rgb[0, :4].transpose(1, 2, 0, 3).reshape(210, 160, 12))  # 4 RGB frames
    gray4 = np.zeros((84, 84, 4), np.uint8)

    def cv2_stacked():       # ImagePreprocess(grayscale=True) on (210, 160, 12), its OpenCV path
        groups = np.ascontiguousarray(stacked.reshape(210, 160, 4, 3).transpose(2, 0, 1, 3))
        for g in range(4):
            gray4[..., g] = cv2.resize(cv2.cvtColor(groups[g], to_gray), (84, 84), interpolation=area)

    def cv2_gray8():
        for i in range(8):
            out8[i] = cv2.resize(np.maximum(gray[1, i], gray[0, i]), (84, 84), interpolation=area)

    def cv2_rgb8():
        for i in range(8):
            out8[i] = cv2.resize(cv2.cvtColor(np.maximum(rgb[1, i], rgb[0, i]), to_gray), (84, 84),
                                 interpolation=area)

    cases = [
        ("gray max-pool + 84x84 (ALE gray screens), 1 thread", 1, 1,
         cv2_gray, lambda: F.preprocess_frame(gray[0, 0], gray[1, 0], stack[-1])),
        ("RGB max-pool + gray + 84x84 (SB3 WarpFrame), 1 thread", 1, 1,
         cv2_rgb, lambda: F.preprocess_frame(rgb[0, 0], rgb[1, 0], stack[-1])),
        ("RGB 84x84, colour kept (ImagePreprocess), 1 thread", 1, 1,
         cv2_colour, lambda: F.preprocess_frame(rgb[0, 0], None, colour, grayscale=False)),
        ("4 stacked RGB frames (210, 160, 12) -> gray (84, 84, 4) (ImagePreprocess), 1 thread", 4, 1,
         cv2_stacked, lambda: F.preprocess_frame(stacked, None, gray4)),
        ("gray max-pool + 84x84, N=8 envs, 2 threads", 8, 2,
         cv2_gray8, lambda: F.preprocess_frames(gray[0], gray[1], out8)),
        ("RGB max-pool + gray + 84x84, N=8 envs, 2 threads", 8, 2,
         cv2_rgb8, lambda: F.preprocess_frames(rgb[0], rgb[1], out8)),
    ]
    header("Frame preprocessing: time per frame, rlox kernel vs OpenCV (210x160 -> 84x84)")
    before_rlox, before_cv2 = rlox.get_num_threads(), cv2.getNumThreads()
    try:
        for name, n, threads, peer_fn, rlox_fn in cases:
            rlox.set_num_threads(threads)
            cv2.setNumThreads(threads)
            ours, theirs = [], []
            for r in range(rounds):                  # interleaved: load falls on both
                for fn, out in [(rlox_fn, ours), (peer_fn, theirs)][:: 1 if r % 2 == 0 else -1]:
                    out.append(measure(fn, min_time=0.1, repeats=3) / n)
            table.add(name, rlox=float(np.median(ours)), peer=float(np.median(theirs)),
                      peer_name="OpenCV (np.maximum, cvtColor, resize)",
                      note=f"{rounds} rounds; per frame; OpenCV {threads} thread(s) (cv2.setNumThreads), "
                           f"rlox {threads} (rlox.set_num_threads); results equal bit for bit")
    finally:
        rlox.set_num_threads(before_rlox)
        cv2.setNumThreads(before_cv2)

    header("AtariWrapper: env steps per CPU second (Breakout, 4 frames per step), frame kernel vs its OpenCV path")
    ours, theirs = [], []
    for r in range(rounds):
        for kind, out in [("rlox", ours), ("rlox-cv2", theirs)][:: 1 if r % 2 == 0 else -1]:
            out.append(_wrapper_sps(kind, wrapper_steps, clock=time.process_time))
    table.add("AtariWrapper step (Breakout), frame kernel, per CPU second", rlox=float(np.median(ours)),
              peer=float(np.median(theirs)), peer_name="same, OpenCV path", unit="steps/s",
              note=f"{rounds} rounds x {wrapper_steps} steps, CPU (process) time; rounds kernel "
                   f"{np.round(ours).tolist()}, OpenCV {np.round(theirs).tolist()}; the step is mostly ALE "
                   f"emulation (4 frames), the frame is one 210x160 -> 84x84 max-pool + resize")
    table.finish()

    header("PPO rollout observations, 8 envs x 128 steps of (4, 84, 84): peak memory of one collect")
    u8, f32 = _rollout_obs_memory()
    print(f"  uint8 {u8 / 1e6:.1f} MB, float32 {f32 / 1e6:.1f} MB: {f32 / u8:.2f}x less with uint8 "
          f"(the obs buffer alone: {8 * 128 * 4 * 84 * 84 / 1e6:.1f} MB vs {4 * 8 * 128 * 4 * 84 * 84 / 1e6:.1f} MB)",
          flush=True)

def _bar_env():
    """The SAC rows' synthetic pixel task: 3x64x64 uint8 frames of an orange vertical bar at a
    random column, one action in [-1, 1], reward ``-|a - x|`` for the bar's x; 50-step episodes."""
    import gymnasium as gym

    class Bar(gym.Env):
        size = 64

        def __init__(self):
            self.observation_space = gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)
            self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def _obs(self):
            img = np.zeros((3, 64, 64), np.uint8)
            img[:, :, self.col:self.col + 4] = np.array([255, 160, 60], np.uint8)[:, None, None]
            return img

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            self.col = int(self.np_random.integers(0, 61))
            return self._obs(), {}

        def step(self, action):
            x = 2.0 * self.col / 60 - 1.0
            reward = -abs(float(np.asarray(action).reshape(-1)[0]) - x)
            self.t += 1
            self.col = int(self.np_random.integers(0, 61))
            return self._obs(), reward, False, self.t >= 50, {}

    return Bar()


SAC_ENV = "RloxBenchBar64-v0"
SAC_HP = dict(buffer_size=10_000, learning_starts=100, batch_size=256, learning_rate=3e-4, gamma=0.99,
              tau=0.005, train_freq=1, gradient_steps=1)


def _rlox_sac_sps(steps: int, share_encoder: bool) -> tuple[float, float]:
    from rlox import Trainer

    trainer = Trainer("sac", env=SAC_ENV, seed=0, hidden=256, share_encoder=share_encoder,
                      steps_per_iteration=steps, **SAC_HP)
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.train(total_timesteps=steps)
    return steps / (time.perf_counter() - t0), steps / (time.process_time() - c0)


def _sb3_sac_sps(steps: int) -> tuple[float, float]:
    from stable_baselines3 import SAC

    model = SAC("CnnPolicy", _bar_env(), seed=0, device="cpu", verbose=0, **SAC_HP)
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps)
    return steps / (time.perf_counter() - t0), steps / (time.process_time() - c0)


def _sac_section(rounds: int, steps: int) -> None:
    import gymnasium as gym

    if SAC_ENV not in gym.registry:
        gym.register(SAC_ENV, entry_point=_bar_env)
    table = Table("pixels_sac", "Pixels: SAC from 3x64x64 images (NatureCNN) throughput, rlox vs SB3")
    header(f"SAC training from pixels: env steps/s ({steps} steps, {SAC_HP['learning_starts']} random, 1 torch thread)")
    runs: dict[str, list[tuple[float, float]]] = {"separate": [], "shared": [], "sb3": []}
    fns = {"separate": lambda: _rlox_sac_sps(steps, False), "shared": lambda: _rlox_sac_sps(steps, True),
           "sb3": lambda: _sb3_sac_sps(steps)}
    for r in range(rounds):
        order = list(fns)[:: 1 if r % 2 == 0 else -1]
        for name in order:
            runs[name].append(fns[name]())
            print(f"  round {r}: {name} {runs[name][-1][0]:.1f} steps/s wall, {runs[name][-1][1]:.1f} per CPU s",
                  flush=True)
    sb3_cpu = float(np.median([x[1] for x in runs["sb3"]]))
    for name, case in (("separate", "SAC pixels, actor and critics each a CNN (share_encoder=False)"),
                       ("shared", "SAC pixels, critics' CNN detached for the actor (share_encoder=True, default)")):
        cpu = [a[1] / b[1] for a, b in zip(runs[name], runs["sb3"])]
        table.add(case + ", per CPU second", rlox=float(np.median([x[1] for x in runs[name]])), peer=sb3_cpu,
                  peer_name="SB3 SAC CnnPolicy (default: a CNN each)", unit="steps/s",
                  note=f"{rounds} rounds x {steps} steps; CPU-time ratio per round {min(cpu):.2f}-{max(cpu):.2f}x; "
                       f"wall rates rlox {np.round([x[0] for x in runs[name]], 1).tolist()}, SB3 "
                       f"{np.round([x[0] for x in runs['sb3']], 1).tolist()}")
    table.finish()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1 if QUICK else 3)
    ap.add_argument("--steps", type=int, default=1024 if QUICK else 2048,
                    help="PPO env steps per run (all 8 envs together)")
    ap.add_argument("--wrapper-steps", type=int, default=2000)
    ap.add_argument("--sections", nargs="+", choices=("frames", "atari", "sac"), default=["frames", "atari", "sac"],
                    help="frames: the frame kernel vs OpenCV (table pixels_frames); atari: the AtariWrapper and "
                         "PPO rows (table pixels); sac: the SAC rows (table pixels_sac)")
    ap.add_argument("--sac-steps", type=int, default=200 if QUICK else 600, help="SAC env steps per run (the first 100 random)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if "frames" in args.sections:
        _frames_section(args.rounds, args.wrapper_steps)
    if "sac" in args.sections:
        _sac_section(args.rounds, args.sac_steps)
    if "atari" not in args.sections:
        return
    table = Table("pixels", "Pixels: Atari preprocessing and PPO (NatureCNN) throughput, rlox vs SB3")

    header("AtariWrapper: env steps/s (Breakout, 4 frames per step)")
    ours, theirs = [], []
    for r in range(args.rounds):
        order = [("rlox", ours), ("sb3", theirs)][:: 1 if r % 2 == 0 else -1]
        for kind, out in order:
            out.append(_wrapper_sps(kind, args.wrapper_steps))
    table.add("AtariWrapper step (Breakout)", rlox=float(np.median(ours)), peer=float(np.median(theirs)),
              peer_name="SB3 AtariWrapper+stack", unit="steps/s",
              note=f"{args.rounds} rounds x {args.wrapper_steps} steps; rounds rlox {np.round(ours).tolist()}, "
                   f"SB3 {np.round(theirs).tolist()}")

    header(f"PPO training on {GAME}: env steps/s (8 envs, zoo Atari preset, 1 torch thread)")
    # Wall and CPU (process) time per run: on a shared machine the CPU-time rate is the steadier
    # measure of the work each library does (one torch thread, envs in-process on both sides).
    ours, theirs, floors = [], [], []
    for r in range(args.rounds):
        order = [(_rlox_ppo_sps, ours), (_sb3_ppo_sps, theirs)][:: 1 if r % 2 == 0 else -1]
        for fn, out in order:
            out.append(fn(args.steps))
            print(f"  round {r}: {fn.__name__} {out[-1][0]:.0f} steps/s wall, {out[-1][1]:.0f} per CPU s", flush=True)
        floors.append((_cnn_floor_sps(True), _cnn_floor_sps(False)))
        print(f"  round {r}: CNN floor channels-last {floors[-1][0]:.0f}, NCHW {floors[-1][1]:.0f} steps per CPU s",
              flush=True)
    wall = [a[0] / b[0] for a, b in zip(ours, theirs)]
    cpu = [a[1] / b[1] for a, b in zip(ours, theirs)]
    r_cpu, s_cpu = float(np.median([o[1] for o in ours])), float(np.median([t[1] for t in theirs]))
    floor_cl, floor_nchw = float(np.median([f[0] for f in floors])), float(np.median([f[1] for f in floors]))
    table.add(f"PPO train {GAME} (8 envs), per CPU second", rlox=r_cpu, peer=s_cpu,
              peer_name="SB3 PPO CnnPolicy", unit="steps/s", goal=2.0,
              note=f"{args.rounds} rounds x {args.steps} steps; CPU-time ratio per round "
                   f"{min(cpu):.2f}-{max(cpu):.2f}x, wall ratio per round {min(wall):.2f}-{max(wall):.2f}x "
                   f"(wall rates rlox {np.round([o[0] for o in ours]).tolist()}, SB3 "
                   f"{np.round([t[0] for t in theirs]).tolist()}); rlox at {r_cpu / floor_cl:.0%} of its CNN "
                   f"floor, SB3 at {s_cpu / floor_nchw:.0%} of its")
    table.add("NatureCNN compute floor per PPO iteration, channels-last (rlox)", rlox=floor_cl,
              peer=floor_nchw, peer_name="same, NCHW (SB3's layout)", unit="steps/s",
              note="per CPU second: 128 forwards of batch 8 + 16 forward/backward/Adam steps of batch 256, "
                   "nothing else; a 2x lead needs the peer below half of its floor")
    table.finish()


if __name__ == "__main__":
    main()
