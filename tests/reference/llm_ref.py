"""Plain oracles for the LLM kernels (obviously correct, slow): group advantages, token KL,
next-fit and first-fit-decreasing packing in pure Python."""
import math

import numpy as np


def group_advantages(rewards, group_size, eps=1e-4, scale="group"):
    """(r - group mean) / (std + eps), std with ddof=1 (of the group, or of the whole batch)."""
    r = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(r)
    batch_std = float(np.std(r, ddof=1)) if r.size > 1 else 0.0
    for start in range(0, r.size, group_size):
        g = r[start:start + group_size]
        if np.all(g == g[0]):
            continue                      # one completion or all rewards equal: zeros
        centred = g - g.mean()
        if scale == "group":
            centred = centred / (np.std(g, ddof=1) + eps)
        elif scale == "batch":
            centred = centred / (batch_std + eps)
        out[start:start + group_size] = centred
    return out


def token_kl(log_p, log_q, estimator):
    """Per-token estimator in float64: k1 = d, k2 = d^2 / 2, k3 = e^-d - 1 + d (d = lp - lq)."""
    d = np.asarray(log_p, dtype=np.float64) - np.asarray(log_q, dtype=np.float64)
    if estimator == "k1":
        return d
    if estimator == "k2":
        return 0.5 * d * d
    return k3(-d)


def k3(x):
    """exp(x) - x - 1 in float64. expm1(x) - x still cancels for tiny x (relative error
    ~1e-4 at x = 1e-12), so |x| < 1e-2 takes the Taylor series (error below x^7 / 5040)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        series = x * x * (1 / 2 + x * (1 / 6 + x * (1 / 24 + x * (1 / 120 + x / 720))))
        return np.where(np.abs(x) < 1e-2, series, np.expm1(x) - x)


def next_fit_rows(lengths, max_length):
    """Rows used by next-fit in the given order (empty sequences take no space)."""
    rows, room = 0, 0
    for n in lengths:
        if n == 0:
            continue
        if rows == 0 or n > room:
            rows, room = rows + 1, max_length
        room -= n
    return rows


def first_fit_decreasing(lengths, max_length):
    """Placement (row, offset) per sequence by first-fit decreasing with a linear scan over the
    rows (O(n * rows)); longest first, ties in input order; (-1, 0) for an empty sequence."""
    placement = [(-1, 0)] * len(lengths)
    room = []                                     # free tokens per open row
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        n = lengths[i]
        if n == 0:
            continue
        for row, free in enumerate(room):
            if free >= n:
                break
        else:
            row = len(room)
            room.append(max_length)
        placement[i] = (row, max_length - room[row])
        room[row] -= n
    return placement, len(room)


def pack_sequences(sequences, max_length, pad_id=0, truncate=False):
    """Pure-Python FFD packing with the same outputs as rlox.pack_sequences (NumPy slices fill)."""
    seqs = [np.asarray(s)[:max_length] if truncate else np.asarray(s) for s in sequences]
    lengths = [len(s) for s in seqs]
    if any(n > max_length for n in lengths):
        raise ValueError("a sequence is longer than max_length")
    placement, rows = first_fit_decreasing(lengths, max_length)
    input_ids = np.full((rows, max_length), pad_id, dtype=np.int64)
    attention_mask = np.zeros((rows, max_length), dtype=np.int64)
    position_ids = np.zeros((rows, max_length), dtype=np.int64)
    sequence_ids = np.full((rows, max_length), -1, dtype=np.int64)
    for i, (s, (row, off)) in enumerate(zip(seqs, placement)):
        if row < 0:
            continue
        span = slice(off, off + len(s))
        input_ids[row, span] = s
        attention_mask[row, span] = 1
        position_ids[row, span] = np.arange(len(s))
        sequence_ids[row, span] = i
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "position_ids": position_ids, "sequence_ids": sequence_ids,
            "placement": np.array(placement, dtype=np.int64).reshape(-1, 2),
            "lengths": np.array(lengths, dtype=np.int64)}


def min_rows(lengths, max_length):
    """A lower bound on any packing: ceil(total tokens / max_length)."""
    return math.ceil(sum(lengths) / max_length)
