"""Plain-loop oracles for rlox.evaluation (obviously correct, slow)."""
import math


def iqm_ref(scores):
    """Sort, drop floor(n/4) from each end, average the rest."""
    xs = sorted(float(s) for row in _rows(scores) for s in row)
    n = len(xs)
    cut = math.floor(0.25 * n)
    kept = xs[cut:n - cut]
    return sum(kept) / len(kept)


def profile_ref(scores, thresholds):
    xs = [float(s) for row in _rows(scores) for s in row]
    return [sum(1 for x in xs if x > t) / len(xs) for t in thresholds]


def _rows(scores):
    out = []
    for row in scores:
        out.append(list(row) if hasattr(row, "__len__") else [row])
    return out
