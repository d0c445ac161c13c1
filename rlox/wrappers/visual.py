"""Wrappers for learning from pixels: frame stacking, resizing, the standard Atari pipeline and
DeepMind Control through dm-control's own API.

    import gymnasium as gym
    from rlox.wrappers.visual import FrameStack, ImagePreprocess, AtariWrapper, DMControlWrapper, make_atari

    env = AtariWrapper(make_atari("ALE/Pong-v5"))          # obs (4, 84, 84) uint8
    env = DMControlWrapper("cartpole", "swingup")           # proprio: obs (5,) float32
    env = DMControlWrapper("cartpole", "swingup", from_pixels=True, height=64, width=64)  # (3, 64, 64) uint8

Images stay ``uint8`` in memory (4x less than float32); the networks scale them to [0, 1]
(``rlox.networks.NatureCNN``). Layouts: a 3-D image space is channel-first when its smallest
axis is the first one (``(C, H, W)``), channel-last otherwise (``(H, W, C)``); a 2-D one is a
single gray frame ``(H, W)``. Each wrapper keeps the layout it is given and says the exact
shapes in its observation space.
"""
from __future__ import annotations

import difflib
import os
from collections import deque
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["FrameStack", "ImagePreprocess", "AtariWrapper", "DMControlWrapper", "DMC_ID", "make_atari",
           "image_layout", "is_image_space", "is_atari_id", "resize_frames", "area_kernel_applies"]

Layout = Literal["chw", "hwc", "hw"]

try:    # ALE ids ("ALE/Pong-v5") work with gym.make once this module is imported
    import ale_py as _ale_py

    gym.register_envs(_ale_py)
except ImportError:     # make_atari / AtariWrapper say which extra to install
    _ale_py = None


# ---------------------------------------------------------------------- layouts
def image_layout(shape: tuple[int, ...]) -> Layout | None:
    """``"chw"``, ``"hwc"`` or ``"hw"`` for an image shape, None for anything else.

    A 3-D shape is channel-first when its first axis is its smallest (SB3's rule), so
    ``(4, 84, 84)`` is CHW and ``(84, 84, 12)`` is HWC; images are at least 8x8 pixels.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) == 2 and min(shape) >= 8:
        return "hw"
    if len(shape) == 3:
        if shape[0] <= min(shape[1:]) and min(shape[1:]) >= 8:
            return "chw"
        if min(shape[:2]) >= 8:
            return "hwc"
    return None


def is_image_space(space: gym.Space) -> bool:
    """A ``Box`` of ``uint8`` with an image layout (what the CNN feature extractors take)."""
    return (isinstance(space, spaces.Box) and space.dtype == np.uint8
            and image_layout(space.shape) is not None)


def _check_image_space(space: gym.Space, who: str) -> Layout:
    if not isinstance(space, spaces.Box):
        raise TypeError(f"{who} needs a Box image observation space, got {space}")
    layout = image_layout(space.shape)
    if layout is None:
        raise ValueError(f"{who} needs an image observation space (H, W), (H, W, C) or (C, H, W) with "
                         f"sides >= 8, got shape {space.shape}; it is not meant for vector observations")
    return layout


def _positive_int(name: str, value: Any, who: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{who}: {name} must be an int >= {minimum}, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------- FrameStack
class FrameStack(gym.Wrapper):
    """Stack the last ``n_frames`` observations along the channel axis.

    ``(H, W)`` -> ``(n, H, W)``; ``(C, H, W)`` -> ``(n*C, H, W)``; ``(H, W, C)`` ->
    ``(H, W, n*C)``; a vector ``(D,)`` -> ``(n*D,)``. Oldest frame first. After ``reset``
    the stack holds ``n_frames`` copies of the first observation (gymnasium's
    ``FrameStackObservation`` default; SB3's ``VecFrameStack`` pads with zeros instead).
    """

    def __init__(self, env: gym.Env, n_frames: int = 4) -> None:
        super().__init__(env)
        self.n_frames = _positive_int("n_frames", n_frames, "FrameStack")
        space = env.observation_space
        if not isinstance(space, spaces.Box):
            raise TypeError(f"FrameStack needs a Box observation space, got {space}")
        layout = image_layout(space.shape) if len(space.shape) > 1 else "vec"
        if layout is None:
            raise ValueError(f"FrameStack: cannot tell the channel axis of shape {space.shape}; expected "
                             f"(H, W), (H, W, C), (C, H, W) or a vector (D,)")
        self.layout = layout
        n = self.n_frames
        if layout == "hw":
            low, high = np.stack([space.low] * n, 0), np.stack([space.high] * n, 0)
        else:
            axis = -1 if layout == "hwc" else 0
            low, high = np.concatenate([space.low] * n, axis), np.concatenate([space.high] * n, axis)
        self.observation_space = spaces.Box(low=low, high=high, dtype=space.dtype)
        self._frames: deque[np.ndarray] = deque(maxlen=n)

    def _stacked(self) -> np.ndarray:
        if self.layout == "hw":
            return np.stack(self._frames, 0)
        return np.concatenate(self._frames, -1 if self.layout == "hwc" else 0)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        for _ in range(self.n_frames):
            self._frames.append(obs)
        return self._stacked(), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._frames.append(obs)
        return self._stacked(), reward, terminated, truncated, info


# ---------------------------------------------------------------------- resizing
def _cv2():
    try:
        import cv2
    except ImportError as exc:
        raise ImportError("image resizing needs OpenCV: pip install 'rlox[atari]' "
                          "(or opencv-python-headless)") from exc
    return cv2


def area_kernel_applies(height_in: int, width_in: int, height: int, width: int) -> bool:
    """Whether rlox's frame kernel (``rlox._ext.frames``) resizes ``height_in x width_in`` to
    ``height x width``: a downscale (both sides no larger) that is not an integer factor in
    both axes. There it equals OpenCV's ``INTER_AREA`` bit for bit (the same weights and float
    sums) and is faster (``benchmarks/bench_pixels.py``); elsewhere OpenCV takes other code
    paths (``resizeAreaFast`` for integer factors, bilinear-style upscaling), which the
    wrappers keep by calling cv2. The integer test is OpenCV's own (``is_area_fast``)."""
    if not (1 <= height <= height_in and 1 <= width <= width_in):
        return False
    sx, sy = 1.0 / (width / width_in), 1.0 / (height / height_in)
    eps = np.finfo(np.float64).eps
    return not (abs(sx - round(sx)) < eps and abs(sy - round(sy)) < eps)


def resize_frames(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize ``[N, H, W]`` or ``[N, H, W, C]`` uint8 frames with area interpolation (OpenCV's
    ``INTER_AREA``, what SB3's ``WarpFrame`` and gymnasium's ``AtariPreprocessing`` use).

    Non-integer downscales (210x160 -> 84x84) run in rlox's frame kernel, all N frames in one
    call split across ``rlox.set_num_threads`` threads, with OpenCV's exact results; other
    sizes go through ``cv2.resize`` frame by frame."""
    frames = np.asarray(frames)
    out = np.empty((frames.shape[0], height, width, *frames.shape[3:]), dtype=frames.dtype)
    if frames.dtype == np.uint8 and frames.ndim in (3, 4) and \
            area_kernel_applies(frames.shape[1], frames.shape[2], height, width):
        return _frames_kernel().preprocess_frames(frames, None, out, grayscale=False)
    cv2 = _cv2()
    for i in range(frames.shape[0]):
        r = cv2.resize(frames[i], (width, height), interpolation=cv2.INTER_AREA)
        out[i] = r.reshape(out.shape[1:])
    return out


def _frames_kernel():
    from rlox._ext import frames

    return frames


def _to_gray(rgb: np.ndarray) -> np.ndarray:
    """``[..., 3]`` uint8 RGB -> ``[...]`` uint8 luminance (ITU-R BT.601, OpenCV's RGB2GRAY)."""
    cv2 = _cv2()
    h, w = rgb.shape[-3], rgb.shape[-2]
    return cv2.cvtColor(np.ascontiguousarray(rgb.reshape(-1, w, 3)), cv2.COLOR_RGB2GRAY).reshape(
        *rgb.shape[:-3], h, w)


class ImagePreprocess(gym.ObservationWrapper):
    """Resize to ``height x width`` and (optionally) convert RGB to grayscale, keeping ``uint8``.

    Channels are taken in groups of 3 (RGB) for grayscale, so a stack of 4 RGB frames
    ``(H, W, 12)`` becomes 4 gray frames ``(height, width, 4)``. The layout is kept:
    ``(H, W, C)`` -> ``(height, width, C')``, ``(C, H, W)`` -> ``(C', height, width)``,
    ``(H, W)`` -> ``(height, width)``. Scaling to [0, 1] happens in the network (uint8 costs
    4x less memory in rollouts and replay).

    Downscales by a non-integer factor (the usual 210x160 -> 84x84) run in rlox's frame kernel
    (gray conversion and area resize in one pass, OpenCV's results bit for bit); integer
    factors and upscaling use OpenCV (``area_kernel_applies`` says which).
    """

    def __init__(self, env: gym.Env, width: int = 84, height: int = 84, grayscale: bool = True) -> None:
        super().__init__(env)
        self.width = _positive_int("width", width, "ImagePreprocess")
        self.height = _positive_int("height", height, "ImagePreprocess")
        self.grayscale = bool(grayscale)
        space = env.observation_space
        self.layout = _check_image_space(space, "ImagePreprocess")
        if space.dtype != np.uint8:
            raise TypeError(f"ImagePreprocess needs uint8 images, got dtype {space.dtype}; pixel "
                            f"observations of gymnasium/ALE/dm-control envs are uint8")
        channels = 1 if self.layout == "hw" else (space.shape[0] if self.layout == "chw" else space.shape[-1])
        if self.grayscale and self.layout != "hw" and channels != 1 and channels % 3 != 0:
            raise ValueError(f"ImagePreprocess(grayscale=True) needs RGB channels in groups of 3 "
                             f"(or 1 gray channel), got {channels} channels in shape {space.shape}")
        self.channels_in = channels
        c_out = channels // 3 if (self.grayscale and channels % 3 == 0 and self.layout != "hw") else channels
        self.channels_out = c_out
        if self.layout == "hw":
            shape = (self.height, self.width)
        elif self.layout == "hwc":
            shape = (self.height, self.width, c_out)
        else:
            shape = (c_out, self.height, self.width)
        self.observation_space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.uint8)
        if self.layout == "hw":
            return resize_frames(obs[None], self.height, self.width)[0]
        hwc = obs if self.layout == "hwc" else np.moveaxis(obs, 0, -1)     # [H, W, C]
        h, w, c = hwc.shape
        if self.grayscale and c % 3 == 0 and c != self.channels_out:
            g = c // 3
            if area_kernel_applies(h, w, self.height, self.width):         # gray + resize, one pass
                small = np.empty((self.height, self.width, g), np.uint8)      # [h, w, G]
                _frames_kernel().preprocess_frame(hwc, None, small.reshape(self.height, self.width, g)
                                                  if g > 1 else small[..., 0])
                return np.ascontiguousarray(np.moveaxis(small, -1, 0)) if self.layout == "chw" else small
            groups = hwc.reshape(h, w, g, 3).transpose(2, 0, 1, 3)         # [G, H, W, 3]
            small = resize_frames(_to_gray(groups), self.height, self.width)   # [G, h, w]
            return small if self.layout == "chw" else np.ascontiguousarray(np.moveaxis(small, 0, -1))
        small = resize_frames(hwc[None], self.height, self.width)[0].reshape(self.height, self.width, c)
        return np.ascontiguousarray(np.moveaxis(small, -1, 0)) if self.layout == "chw" else small


# ---------------------------------------------------------------------- Atari
_ATARI_HELP = "install the Atari extra: pip install 'rlox[atari]' (ale-py ships the ROMs)"


def is_atari_id(env_id: Any) -> bool:
    """Whether ``env_id`` names an ALE game (``"ALE/Pong-v5"``, ``"PongNoFrameskip-v4"``)."""
    return isinstance(env_id, str) and (env_id.startswith("ALE/") or env_id.endswith("NoFrameskip-v4"))


def _import_ale():
    try:
        import ale_py
    except ImportError as exc:
        raise ImportError(f"Atari envs need ale-py; {_ATARI_HELP}") from exc
    gym.register_envs(ale_py)
    return ale_py


def make_atari(env_id: str, **kwargs: Any) -> gym.Env:
    """``gym.make(env_id, frameskip=1)`` for an ALE game, so that ``AtariWrapper`` does the
    frame skip with its max over the last two frames (v5's sticky actions, 0.25, are kept;
    pass ``repeat_action_probability=0.0`` for the v4 protocol). A clear ImportError names
    the extra to install when ale-py is missing."""
    _import_ale()
    if not is_atari_id(env_id):
        raise ValueError(f"{env_id!r} is not an ALE id; expected 'ALE/<Game>-v5' or '<Game>NoFrameskip-v4'")
    kwargs.setdefault("frameskip", 1)
    try:
        return gym.make(env_id, **kwargs)
    except gym.error.Error as exc:
        games = sorted(k for k in gym.registry if k.startswith("ALE/"))
        close = difflib.get_close_matches(env_id, games, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown Atari game {env_id!r}{hint}") from exc


class AtariWrapper(gym.Wrapper):
    """The standard Atari preprocessing (Mnih et al., 2015; Machado et al., 2018), one wrapper.

    In order: NoopReset (up to ``noop_max`` no-ops after reset), MaxAndSkip (repeat the action
    ``frame_skip`` times, sum rewards, max-pool the last two frames: flicker), EpisodicLife
    (a lost life ends the episode for the learner, the game resets only when it is over),
    FireReset (press FIRE after every reset, lost lives included, in games that need it),
    ClipReward (sign of the reward), 84x84 grayscale with area interpolation, FrameStack
    (channel-first ``(frame_stack, 84, 84)`` uint8, padded at reset with the first frame, as
    gymnasium's ``FrameStackObservation``; SB3's ``VecFrameStack`` pads with zeros). Rewards,
    terminations and lives equal SB3's ``AtariWrapper`` step by step on the same seed and
    actions (tests/test_visual.py).

    The gray frame is ALE's own grayscale screen (``getScreenGrayscale``, as gymnasium's
    ``AtariPreprocessing``), read without an RGB render; SB3's ``WarpFrame`` converts RGB with
    OpenCV instead (values differ by a level or two). Envs made with ``frameskip > 1`` (a plain
    ``gym.make("ALE/Pong-v5")`` skips 4) already skip in ALE without the max-pool; there
    ``frame_skip`` is taken as 1. ``make_atari`` makes them with ``frameskip=1``.

    The max-pool and the 210x160 -> 84x84 area resize run as one pass of rlox's frame kernel
    (``rlox._ext.frames.preprocess_frame``) that writes straight into the frame stack; it
    equals ``cv2.resize(np.maximum(a, b), (84, 84), interpolation=cv2.INTER_AREA)`` bit for
    bit. ``use_frame_kernel`` is True where the kernel applies (``area_kernel_applies``: any
    non-integer downscale); set it to False to run the OpenCV path instead.

    ``info["raw_reward"]`` holds the unclipped reward of the step and ``info["lives"]`` the lives.
    """

    def __init__(self, env: gym.Env, frame_stack: int = 4, *, noop_max: int = 30, frame_skip: int = 4,
                 screen_size: int = 84, terminal_on_life_loss: bool = True, clip_reward: bool = True,
                 fire_reset: bool = True) -> None:
        if isinstance(env, str):
            env = make_atari(env)
        super().__init__(env)
        ale = getattr(env.unwrapped, "ale", None)
        if ale is None:
            raise TypeError(f"AtariWrapper needs an ALE env (ale-py), got {type(env.unwrapped).__name__}; "
                            f"make one with rlox.wrappers.visual.make_atari('ALE/Pong-v5')")
        self.ale = ale
        self.frame_stack = _positive_int("frame_stack", frame_stack, "AtariWrapper")
        self.noop_max = _positive_int("noop_max", noop_max, "AtariWrapper", minimum=0)
        self.screen_size = _positive_int("screen_size", screen_size, "AtariWrapper", minimum=8)
        internal = getattr(env.unwrapped, "_frameskip", 1)
        self.frame_skip = _positive_int("frame_skip", frame_skip, "AtariWrapper")
        if not isinstance(internal, int) or internal > 1:
            self.frame_skip = 1     # ALE already skips (and a stochastic skip cannot be pooled)
        self.terminal_on_life_loss = bool(terminal_on_life_loss)
        self.clip_reward = bool(clip_reward)
        meanings = env.unwrapped.get_action_meanings()
        self.fire_reset = bool(fire_reset) and len(meanings) >= 3 and meanings[1] == "FIRE"
        h, w = ale.getScreenDims()
        self._screens = np.zeros((2, h, w), dtype=np.uint8)     # the last two raw frames of a skip
        # the frame stack, oldest first; each step shifts it and writes the new frame in place
        self._stack = np.zeros((self.frame_stack, self.screen_size, self.screen_size), dtype=np.uint8)
        self.use_frame_kernel = area_kernel_applies(h, w, self.screen_size, self.screen_size)
        self._lives = 0
        self._game_over = True
        self.observation_space = spaces.Box(0, 255, (self.frame_stack, self.screen_size, self.screen_size),
                                            dtype=np.uint8)

    # the pieces ---------------------------------------------------------------
    def _gray(self, out: np.ndarray) -> None:
        self.ale.getScreenGrayscale(out)

    def _frame(self, last: np.ndarray, prev: np.ndarray | None = None,
                out: np.ndarray | None = None) -> np.ndarray:
        """The 84x84 frame of ``max(last, prev)`` (``last`` alone when prev is None), written
        into ``out`` (a fresh array when None)."""
        if out is None:
            out = np.empty((self.screen_size, self.screen_size), dtype=np.uint8)
        if self.use_frame_kernel:
            return _frames_kernel().preprocess_frame(last, prev, out)
        pooled = last if prev is None else np.maximum(prev, last)
        out[...] = _cv2().resize(pooled, (self.screen_size, self.screen_size),
                                 interpolation=_cv2().INTER_AREA)
        return out

    def _skip_step(self, action) -> tuple[bool, float, bool, bool, dict]:
        """MaxAndSkip: repeat ``action``, sum the rewards; the frame is the max over the last
        two screens (``_screens[0]``, ``_screens[1]``) when the first flag is True, else
        ``_screens[1]`` alone."""
        total, terminated, truncated, info = 0.0, False, False, {}
        n = self.frame_skip
        for t in range(n):
            _, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if t == n - 2:
                self._gray(self._screens[0])
            if t == n - 1 or terminated or truncated:
                self._gray(self._screens[1])
            if terminated or truncated:
                break
        # n == 1, or ended before the second-to-last frame: no pair to pool
        pool = n > 1 and t >= n - 2
        return pool, total, terminated, truncated, info

    def _real_reset(self, seed, options) -> dict:
        """A new game: ``env.reset`` and NoopReset's no-ops (single frames). The no-op count is
        drawn from the ALE env's own ``np_random``, as SB3's ``NoopResetEnv`` draws it, so one
        seed gives both the same starts."""
        _, info = self.env.reset(seed=seed, options=options)
        # NoopReset (Mnih et al., 2015): a random number of no-ops so starts differ.
        noops = int(self.env.unwrapped.np_random.integers(1, self.noop_max + 1)) if self.noop_max > 0 else 0
        for _ in range(noops):
            _, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                _, info = self.env.reset(options=options)
        self._gray(self._screens[1])
        return info

    # gymnasium API --------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A real reset when the game is over (or ``seed`` is given, or ``terminal_on_life_loss``
        is off); after a lost life only EpisodicLife's no-op step, so the game goes on. Then
        FireReset presses FIRE and UP (actions 1, 2) in games that wait for FIRE, after every
        reset, lost lives included: the order of OpenAI baselines' and SB3's wrappers
        (FireReset over EpisodicLife over MaxAndSkip), so each of these steps is a skipped step.
        Without it, Breakout stands still after each lost life until the policy learns FIRE."""
        pool = False
        if self._game_over or not self.terminal_on_life_loss or seed is not None:
            info = self._real_reset(seed, options)
        else:
            # EpisodicLife: the game goes on after a lost life; one no-op step moves past it.
            pool, _, terminated, truncated, info = self._skip_step(0)
            if terminated or truncated:
                pool, info = False, self._real_reset(None, options)
        if self.fire_reset:
            for a in (1, 2):
                pool, _, terminated, truncated, info = self._skip_step(a)
                if terminated or truncated:
                    pool, info = False, self._real_reset(None, options)
        self._game_over = False
        self._lives = self.ale.lives()
        self._stack[:] = self._frame(self._screens[1], self._screens[0] if pool else None, self._stack[-1])
        info = dict(info)
        info["lives"] = self._lives
        return self._stack.copy(), info

    def step(self, action):
        pool, reward, terminated, truncated, info = self._skip_step(action)
        self._game_over = terminated or truncated
        lives = self.ale.lives()
        if self.terminal_on_life_loss and 0 < lives < self._lives:
            terminated = True       # EpisodicLife (Mnih et al., 2015)
        self._lives = lives
        self._stack[:-1] = self._stack[1:]      # oldest out (NumPy copies overlapping slices safely)
        self._frame(self._screens[1], self._screens[0] if pool else None, self._stack[-1])
        info = dict(info)
        info["raw_reward"] = reward
        info["lives"] = lives
        if self.clip_reward:
            reward = float(np.sign(reward))     # ClipReward (Mnih et al., 2015)
        return self._stack.copy(), reward, terminated, truncated, info


# ---------------------------------------------------------------------- DeepMind Control
#: gymnasium id of DMControlWrapper: gym.make(DMC_ID, domain="cartpole", task="swingup", ...)
DMC_ID = "rlox/DMControl-v0"
if DMC_ID not in gym.registry:
    gym.register(DMC_ID, entry_point="rlox.wrappers.visual:DMControlWrapper", disable_env_checker=True)


def _dm_suite():
    os.environ.setdefault("MUJOCO_GL", "egl")     # headless rendering (EGL; "osmesa" works too)
    try:
        from dm_control import suite
    except ImportError as exc:
        raise ImportError("DeepMind Control envs need dm-control: pip install 'rlox[dmc]'") from exc
    return suite


class DMControlWrapper(gym.Env):
    """A DeepMind Control Suite task as a gymnasium env, through dm-control's own API.

    Args:
        domain, task: e.g. ``"cartpole"``, ``"swingup"`` (``dm_control.suite.ALL_TASKS``).
        from_pixels: observe ``(3, height, width)`` uint8 camera images (rendered headless through
            EGL; set ``MUJOCO_GL=osmesa`` for software rendering) instead of the proprioceptive
            state (every observation array flattened into one float32 vector, in the task's order).
        height, width, camera_id: the camera image (DreamerV3 and DrQ use 64x64 / 84x84, camera 0;
            quadruped uses camera 2).
        action_repeat: repeat each action this many times, summing the rewards (DrQ/Dreamer: 2).
        seed: the task's random state (also set by ``reset(seed=...)``).
        channels_first: pixel layout ``(3, H, W)`` (default) or ``(H, W, 3)``.

    An episode is 1000 physics steps for every suite task (``1000 / action_repeat`` env steps);
    its end is a truncation (``truncated=True``), as the suite's discount stays 1.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, domain: str = "cartpole", task: str = "swingup", *, from_pixels: bool = False,
                 height: int = 84, width: int = 84, camera_id: int = 0, action_repeat: int = 1,
                 seed: int | None = None, channels_first: bool = True,
                 render_mode: str | None = None) -> None:
        suite = _dm_suite()
        tasks = [f"{d}-{t}" for d, t in suite.ALL_TASKS]
        if (domain, task) not in suite.ALL_TASKS:
            close = difflib.get_close_matches(f"{domain}-{task}", tasks, n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else \
                f"; domains: {', '.join(sorted({d for d, _ in suite.ALL_TASKS}))}"
            raise ValueError(f"dm-control has no task domain={domain!r}, task={task!r}{hint}")
        self.domain, self.task = domain, task
        self.from_pixels = bool(from_pixels)
        self.height = _positive_int("height", height, "DMControlWrapper", minimum=8)
        self.width = _positive_int("width", width, "DMControlWrapper", minimum=8)
        self.camera_id = int(camera_id)
        self.action_repeat = _positive_int("action_repeat", action_repeat, "DMControlWrapper")
        self.channels_first = bool(channels_first)
        self.render_mode = render_mode
        self._suite = suite
        self._seed = seed
        self._env = suite.load(domain, task, task_kwargs={"random": seed})
        # A spec that remakes this env, so vector envs (rlox.envs.make_vec_env, Trainer) can copy it.
        self.spec = gym.envs.registration.EnvSpec(
            DMC_ID, entry_point="rlox.wrappers.visual:DMControlWrapper", disable_env_checker=True,
            kwargs=dict(domain=domain, task=task, from_pixels=self.from_pixels, height=self.height,
                        width=self.width, camera_id=self.camera_id, action_repeat=self.action_repeat,
                        seed=seed, channels_first=self.channels_first))
        spec = self._env.action_spec()
        self.action_space = spaces.Box(spec.minimum.astype(np.float32), spec.maximum.astype(np.float32),
                                       dtype=np.float32)
        if self.from_pixels:
            shape = (3, self.height, self.width) if self.channels_first else (self.height, self.width, 3)
            self.observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)
        else:
            dim = sum(int(np.prod(s.shape)) for s in self._env.observation_spec().values())
            self.observation_space = spaces.Box(-np.inf, np.inf, (dim,), dtype=np.float32)

    def _obs(self, time_step) -> np.ndarray:
        if self.from_pixels:
            img = self.render()
            return np.ascontiguousarray(img.transpose(2, 0, 1)) if self.channels_first else img
        return np.concatenate([np.asarray(v, dtype=np.float32).reshape(-1)
                               for v in time_step.observation.values()])

    def render(self) -> np.ndarray:
        """The camera image ``(height, width, 3)`` uint8."""
        return self._env.physics.render(height=self.height, width=self.width, camera_id=self.camera_id)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:    # a new task random state, as dm-control seeds at load
            self._env = self._suite.load(self.domain, self.task, task_kwargs={"random": seed})
        time_step = self._env.reset()
        return self._obs(time_step), {}

    def step(self, action):
        action = np.asarray(action, dtype=np.float64).reshape(self.action_space.shape)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"DMControlWrapper({self.domain}, {self.task}): action {action} is not finite")
        action = np.clip(action, self.action_space.low, self.action_space.high)
        reward, time_step = 0.0, None
        for _ in range(self.action_repeat):
            time_step = self._env.step(action)
            reward += float(time_step.reward or 0.0)
            if time_step.last():
                break
        terminated = bool(time_step.last() and time_step.discount == 0.0)
        truncated = bool(time_step.last() and not terminated)
        return self._obs(time_step), reward, terminated, truncated, {}

    def close(self) -> None:
        close = getattr(self._env, "close", None)
        if callable(close):
            close()
