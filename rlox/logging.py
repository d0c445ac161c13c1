"""Loggers: where an algorithm's metrics go, once per training iteration.

    from rlox.logging import ConsoleLogger, TensorBoardLogger, WandbLogger, CSVLogger
    trainer = Trainer("ppo", env="CartPole-v1", logger=ConsoleLogger(log_interval=500))
    # step=512 | SPS=1234 | reward=45.20

The algorithm calls ``on_train_step(step, metrics)`` on its logger after each iteration (after
the callbacks, so an evaluation that ran in this iteration is in ``metrics`` too) and
``flush()`` when training ends. ``metrics`` keys are namespaced: ``train/`` (mean_reward,
mean_length, episodes, timesteps, learning_rate), ``loss/`` (policy_loss, value_loss, entropy,
approx_kl, clip_fraction, ...), ``eval/`` (mean_reward, std_reward, ...), ``time/`` (sps,
iteration and per-phase seconds).

``logger=`` takes one logger or a list of them. A ``LoggerCallback`` may also be passed in
``callbacks=[...]``: either way it is fed once per iteration. For another backend, subclass
``LoggerCallback`` and implement ``on_train_step``:

    class MLflowLogger(LoggerCallback):
        def on_train_step(self, step, metrics):
            mlflow.log_metrics({k: v for k, v in metrics.items() if is_scalar(v)}, step=step)

``TensorBoardLogger`` writes TensorBoard event files itself (no tensorboard or TensorFlow
needed to write them; ``tensorboard --logdir`` reads them). ``WandbLogger`` needs ``wandb``
(``pip install 'rlox[logging]'``) and honours ``WANDB_MODE=offline``.
"""
from __future__ import annotations

import csv
import io
import math
import numbers
import os
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, Iterable, Mapping, Sequence, TextIO

import numpy as np

from rlox.callbacks import Callback

__all__ = ["LoggerCallback", "ConsoleLogger", "TensorBoardLogger", "WandbLogger", "CSVLogger",
           "scalar_metrics", "EventFileWriter"]


def _scalar(value: Any) -> float | None:
    """``value`` as a Python float when it is one number (int, float, NumPy or 0-d/1-element
    tensor), else None. Booleans count as numbers (0/1)."""
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "biuf":
        return float(value.reshape(()))
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    if callable(item) and callable(numel):  # a torch tensor, without importing torch
        try:
            if numel() == 1:
                return float(item())
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The entries of ``metrics`` that are single numbers, as floats (others dropped)."""
    out = {}
    for k, v in metrics.items():
        t = type(v)
        if t is float:                      # the common case, without the ABC check
            out[k] = v
        elif t is int:
            out[k] = float(v)
        else:
            s = _scalar(v)
            if s is not None:
                out[str(k)] = s
    return out


class LoggerCallback(Callback):
    """Base of the rlox loggers, and of custom logging backends.

    Override ``on_train_step(step, metrics)``; ``flush()`` and ``close()`` are optional.
    A LoggerCallback is a ``Callback``, so it sees the training hooks too (``self.algo`` is the
    algorithm). The algorithm calls ``on_train_step`` once per iteration whether the logger was
    given as ``logger=`` or in ``callbacks=[...]``.
    """

    #: Marks loggers for the training loop (``rlox.algorithms.base.Algorithm.train``).
    is_logger: ClassVar[bool] = True
    #: Env steps between written records (None: every iteration); see ``_due``.
    log_interval: int | None = None
    _next_log: int | None = None

    def _due(self, step: int, metrics: Mapping[str, Any]) -> bool:
        """Whether to write this iteration: always without ``log_interval``; else at the first
        iteration reaching each multiple of it, and whenever evaluation results are present."""
        if self.log_interval is None:
            return True
        if self._next_log is None:
            self._next_log = self.log_interval
        if step >= self._next_log:
            self._next_log = (step // self.log_interval + 1) * self.log_interval
            return True
        return "eval/mean_reward" in metrics

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Called after each training iteration with the env-step count and the metrics."""

    def flush(self) -> None:
        """Write out anything buffered (called when training ends)."""

    def close(self) -> None:
        """Release files and connections; the logger may not be used afterwards."""
        self.flush()


# ====================================================================== console
class ConsoleLogger(LoggerCallback):
    """One line every ``log_interval`` env steps: ``step=500 | SPS=1234 | reward=45.20``.

    When an evaluation ran since the last line, `` | eval=...`` follows.

    Args:
        log_interval: env steps between lines (a line is printed at the first iteration that
            reaches each multiple).
        stream: where to print (default: ``sys.stdout`` at print time).
    """

    def __init__(self, log_interval: int = 1000, stream: TextIO | None = None) -> None:
        super().__init__()
        if isinstance(log_interval, bool) or not isinstance(log_interval, (int, np.integer)) or log_interval < 1:
            raise ValueError(f"ConsoleLogger log_interval must be an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = int(log_interval)
        self.stream = stream
        self._next: int | None = None
        self._eval: float | None = None

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        ev = metrics.get("eval/mean_reward")
        if ev is not None:
            self._eval = float(ev)
        if self._next is None:
            self._next = self.log_interval
        if step < self._next:
            return
        self._next = (step // self.log_interval + 1) * self.log_interval
        print(self.format_line(step, metrics), file=self.stream or sys.stdout, flush=True)

    def format_line(self, step: int, metrics: Mapping[str, Any]) -> str:
        sps = _scalar(metrics.get("time/sps"))
        reward = _scalar(metrics.get("train/mean_reward"))
        parts = [f"step={step}", f"SPS={sps:.0f}" if sps is not None and math.isfinite(sps) else "SPS=-",
                 f"reward={reward:.2f}" if reward is not None and math.isfinite(reward) else "reward=-"]
        if self._eval is not None:
            parts.append(f"eval={self._eval:.2f}")
            self._eval = None
        return " | ".join(parts)


# ====================================================================== TensorBoard
def _crc32c_table() -> list[int]:
    poly, table = 0x82F63B78, []          # CRC-32C (Castagnoli), reflected polynomial
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


# CRC-32C with NumPy. The CRC register is linear over GF(2): starting from register 0, the
# register after a block of r bytes b_0..b_{r-1} is XOR_i A[r-1-i][b_i], where A[k][b] is the
# register after byte b followed by k zero bytes (A[0] is the usual byte table). A register
# carried in from earlier blocks acts like XOR-ing its 4 bytes into the block's first 4 bytes;
# for the first block that is the initial 0xFFFFFFFF, whose effect INIT[r] is precomputed.
# So a record of up to 1024 bytes (an iteration's scalars) is one gather and one XOR-reduce.
_BLOCK = 1024
_A: np.ndarray | None = None
_INIT: np.ndarray | None = None
_ROWS = np.arange(_BLOCK - 1, -1, -1)


def _crc_blocks() -> tuple[np.ndarray, np.ndarray]:
    global _A, _INIT
    if _A is None:
        t0 = np.asarray(_CRC_TABLE, dtype=np.uint32)
        a = np.empty((_BLOCK, 256), dtype=np.uint32)
        a[0] = t0
        for k in range(1, _BLOCK):
            a[k] = (a[k - 1] >> 8) ^ t0[a[k - 1] & 0xFF]
        init = np.zeros(_BLOCK + 1, dtype=np.uint32)
        r = np.arange(4, _BLOCK + 1)
        for j in range(4):
            init[4:] ^= a[r - 1 - j, 0xFF]
        _A, _INIT = a, init
    return _A, _INIT


def _crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    crc, n = 0xFFFFFFFF, len(data)
    if n < 32:
        for b in data:
            crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF
    a, init = _crc_blocks()
    arr = np.frombuffer(data, dtype=np.uint8)
    r = min(n, _BLOCK)
    crc = int(init[r] ^ np.bitwise_xor.reduce(a[_ROWS[_BLOCK - r:], arr[:r]]))
    start = r
    while n - start >= 4:
        block = arr[start:start + _BLOCK].copy()
        r = block.size
        block[:4] ^= np.frombuffer(crc.to_bytes(4, "little"), dtype=np.uint8)
        crc = int(np.bitwise_xor.reduce(a[_ROWS[_BLOCK - r:], block]))
        start += r
    for b in data[start:]:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC: rotate right by 15 and add a constant (mod 2**32)."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_VALUE_PREFIX: dict[str, bytes] = {}


def _value_prefix(tag: str) -> bytes:
    """Everything of a Summary.Value entry before its 4 float bytes (cached per tag)."""
    prefix = _VALUE_PREFIX.get(tag)
    if prefix is None:
        body = _field_bytes(1, tag.encode())
        prefix = _VALUE_PREFIX[tag] = _varint(1 << 3 | 2) + _varint(len(body) + 5) + body + b"\x15"
    return prefix


def _event(wall_time: float, step: int, *, file_version: str | None = None,
           scalars: Iterable[tuple[str, float]] = ()) -> bytes:
    """A serialised ``tensorflow.Event`` protobuf: wall_time (1, double), step (2, int64),
    file_version (3, string) or summary (5, Summary{repeated Value value = 1}), where
    Value{tag = 1 (string), simple_value = 2 (float)}."""
    out = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(int(step))
    if file_version is not None:
        out += _field_bytes(3, file_version.encode())
    pack = struct.Struct("<f").pack
    values = b"".join([_value_prefix(tag) + pack(value) for tag, value in scalars])
    if values:
        out += _field_bytes(5, values)
    return out


def _crc32c_many(datas: Sequence[bytes]) -> list[int]:
    """CRC-32C of each of ``datas`` (records of 4 to 1024 bytes in one gather and one
    ``reduceat``; others one by one)."""
    out = [0] * len(datas)
    batch = [i for i, d in enumerate(datas) if 4 <= len(d) <= _BLOCK]
    for i, d in enumerate(datas):
        if not 4 <= len(d) <= _BLOCK:
            out[i] = _crc32c(d)
    if batch:
        a, init = _crc_blocks()
        lens = np.fromiter((len(datas[i]) for i in batch), dtype=np.int64, count=len(batch))
        buf = np.frombuffer(b"".join([datas[i] for i in batch]), dtype=np.uint8)
        starts = np.cumsum(lens) - lens
        rows = np.repeat(lens + starts - 1, lens) - np.arange(buf.size)   # r-1-i within each record
        crcs = np.bitwise_xor.reduceat(a[rows, buf], starts) ^ init[lens] ^ np.uint32(0xFFFFFFFF)
        for i, c in zip(batch, crcs.tolist()):
            out[i] = c
    return out


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class EventFileWriter:
    """Appends scalar events to one TensorBoard event file (TFRecord framing, CRC-32C).

    Events are queued in memory and encoded, checksummed and written in one batch every
    ``flush_secs`` seconds, every ``max_queue`` events, and on ``flush``/``close`` (so a
    training iteration pays only for queueing).

    Args:
        log_dir: directory (created); the file is ``events.out.tfevents.<time>.<host>.<pid>.<n>``.
        flush_secs: longest time an event waits in memory.
        max_queue: most events waiting in memory.
    """

    _counter = 0

    def __init__(self, log_dir: str | os.PathLike, flush_secs: float = 10.0, max_queue: int = 1000) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        EventFileWriter._counter += 1
        name = (f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}."
                f"{EventFileWriter._counter}")
        self.path = self.log_dir / name
        self._fh = open(self.path, "ab")
        self.flush_secs = float(flush_secs)
        self.max_queue = int(max_queue)
        self._queue: list[tuple[float, int, Mapping[str, float]]] = []
        self._records: list[bytes] = [_event(time.time(), 0, file_version="brain.Event:2")]
        self._last_flush = time.monotonic()
        self.flush()

    def add_scalars(self, step: int, scalars: Mapping[str, float], wall_time: float | None = None) -> None:
        """Queue one event holding every ``tag -> value`` of ``scalars`` at ``step``."""
        if self._fh.closed:
            raise ValueError(f"the event file {str(self.path)!r} is closed")
        if scalars:
            self._queue.append((time.time() if wall_time is None else wall_time, int(step), scalars))
        if len(self._queue) >= self.max_queue or time.monotonic() - self._last_flush >= self.flush_secs:
            self.flush()

    def flush(self) -> None:
        """Encode the queued events and write them (TFRecord: length, masked CRC of the
        length, data, masked CRC of the data)."""
        if self._fh.closed:
            return
        records = self._records + [_event(w, step, scalars=sc.items()) for w, step, sc in self._queue]
        self._queue, self._records = [], []
        if records:
            headers = [struct.pack("<Q", len(r)) for r in records]
            crcs = _crc32c_many(headers + records)
            n = len(records)
            self._fh.write(b"".join([h + struct.pack("<I", _mask(crcs[i])) + r + struct.pack("<I", _mask(crcs[n + i]))
                                     for i, (h, r) in enumerate(zip(headers, records))]))
        self._fh.flush()
        self._last_flush = time.monotonic()

    def close(self) -> None:
        if not self._fh.closed:
            self.flush()
            self._fh.close()


class TensorBoardLogger(LoggerCallback):
    """Scalars of every iteration to TensorBoard event files under ``log_dir``.

    Every single-number metric is written with its namespaced name as the tag
    (``train/mean_reward``, ``loss/policy_loss``, ``eval/mean_reward``, ``time/sps``, ...);
    the x axis is the env-step count. View with ``tensorboard --logdir <log_dir>``.

    Args:
        log_dir: directory of the event files (created).
        flush_secs: how often buffered events reach the disk (also at the end of training).
        log_interval: env steps between records (default: every iteration); iterations with
            evaluation results are always written. Useful when iterations are tiny.
    """

    def __init__(self, log_dir: str | os.PathLike = "runs", flush_secs: float = 10.0,
                 log_interval: int | None = None) -> None:
        super().__init__()
        if log_interval is not None and (isinstance(log_interval, bool) or not isinstance(log_interval, int)
                                         or log_interval < 1):
            raise ValueError(f"TensorBoardLogger log_interval must be None or an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = log_interval
        self.log_dir = Path(log_dir)
        self.flush_secs = float(flush_secs)
        self._writer: EventFileWriter | None = None

    @property
    def writer(self) -> EventFileWriter:
        if self._writer is None or self._writer._fh.closed:
            self._writer = EventFileWriter(self.log_dir, self.flush_secs)
        return self._writer

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        if self._due(step, metrics):
            self.writer.add_scalars(int(step), scalar_metrics(metrics))

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


# ====================================================================== Weights & Biases
class WandbLogger(LoggerCallback):
    """Metrics to a Weights & Biases run (``wandb.init(project=..., name=...)``).

    The run starts when training starts (or on the first metrics) with the algorithm's config,
    env and seed in ``wandb.config``, and finishes when training ends (``finish_on_end``).
    Offline: set ``WANDB_MODE=offline`` or pass ``mode="offline"`` (sync later with
    ``wandb sync``).

    Args:
        project: W&B project name.
        name: run name.
        config: extra values for ``wandb.config``.
        finish_on_end: call ``run.finish()`` when training ends (default True).
        log_interval: env steps between logged rows (default: every iteration).
        **init_kwargs: more ``wandb.init`` arguments (``entity``, ``tags``, ``mode``, ``dir``, ...).

    Raises:
        ImportError: when ``wandb`` is not installed (at construction, with the install command).
    """

    def __init__(self, project: str = "rlox", name: str | None = None, config: Mapping[str, Any] | None = None,
                 *, finish_on_end: bool = True, log_interval: int | None = None, **init_kwargs: Any) -> None:
        super().__init__()
        if log_interval is not None and (isinstance(log_interval, bool) or not isinstance(log_interval, int)
                                         or log_interval < 1):
            raise ValueError(f"WandbLogger log_interval must be None or an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = log_interval
        try:
            import wandb
        except ImportError as exc:
            raise ImportError("WandbLogger needs the wandb package, which is not installed; install it with "
                              "pip install 'rlox[logging]' (or pip install wandb), or use TensorBoardLogger / "
                              "CSVLogger instead") from exc
        self._wandb = wandb
        self.project = project
        self.name = name
        self.config = dict(config or {})
        self.finish_on_end = bool(finish_on_end)
        self.init_kwargs = init_kwargs
        self.run: Any = None

    def _run_config(self) -> dict[str, Any]:
        cfg = dict(self.config)
        algo = self.algo
        if algo is not None:
            to_dict = getattr(getattr(algo, "config", None), "to_dict", None)
            if callable(to_dict):
                cfg.setdefault("algorithm_config", to_dict())
            cfg.setdefault("algorithm", getattr(algo, "name", type(algo).__name__))
            cfg.setdefault("env", str(getattr(algo, "env_id", "")))
            cfg.setdefault("seed", getattr(algo, "seed", None))
        return cfg

    def _start(self) -> None:
        if self.run is None:
            self.run = self._wandb.init(project=self.project, name=self.name, config=self._run_config(),
                                        **self.init_kwargs)

    def on_training_start(self) -> None:
        self._start()

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        self._start()
        if self._due(step, metrics):
            self.run.log(scalar_metrics(metrics), step=int(step))

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.finish_on_end:
            self.close()

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


# ====================================================================== CSV
class CSVLogger(LoggerCallback):
    """One CSV row per iteration: ``step`` then every single-number metric.

    Columns are those of the first row; a metric that appears later (``eval/...`` after the
    first evaluation) adds a column, and the file is rewritten once with the wider header
    (earlier rows get empty cells).

    Args:
        path: the CSV file (its directory is created; an existing file is replaced at the start
            of the first training run).
        log_interval: env steps between rows (default: every iteration); iterations with
            evaluation results are always written.
    """

    def __init__(self, path: str | os.PathLike = "metrics.csv", log_interval: int | None = None) -> None:
        super().__init__()
        if log_interval is not None and (isinstance(log_interval, bool) or not isinstance(log_interval, int)
                                         or log_interval < 1):
            raise ValueError(f"CSVLogger log_interval must be None or an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = log_interval
        self.path = Path(path)
        self.columns: list[str] = []
        self._known: set[str] = set()
        self._rows: list[dict[str, float]] = []
        self._pending: list[dict[str, float]] = []
        self._fh: io.TextIOBase | None = None
        self._writer: Any = None

    def _line(self, row: Mapping[str, float]) -> list[Any]:
        return [row["step"], *[row.get(c, "") for c in self.columns]]

    def _open(self) -> None:
        """(Re)write the file: header, then every row so far."""
        if self._fh is not None:
            self._fh.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "w", newline="")
        self._writer = csv.writer(self._fh)
        self._writer.writerow(["step", *self.columns])
        self._writer.writerows(self._line(r) for r in self._rows)
        self._pending.clear()

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        if not self._due(step, metrics):
            return
        row: dict[str, Any] = scalar_metrics(metrics)
        widen = self._fh is None or len(row) > len(self._known) or not self._known.issuperset(row)
        if widen:
            new = [k for k in row if k not in self._known]
            self.columns.extend(new)
            self._known.update(new)
        row["step"] = int(step)
        self._rows.append(row)
        if widen:
            self._open()
            return
        self._pending.append(row)          # written in batches (flush, or every 256 rows)
        if len(self._pending) >= 256:
            self._write_pending()

    def _write_pending(self) -> None:
        if self._pending and self._writer is not None:
            self._writer.writerows(self._line(r) for r in self._pending)
        self._pending.clear()

    def flush(self) -> None:
        if self._fh is not None:
            self._write_pending()
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._write_pending()
            self._fh.close()
            self._fh = None
