"""Small helpers the concrete callbacks share (argument checks, CSV rows)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence


def _finite(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _check_int(owner: str, name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{owner} {name} must be an int >= {low}, got {value!r}")
    return int(value)


def _append_csv(path: Path, columns: Sequence[str], row: Mapping[str, Any], fresh: bool) -> None:
    """Append ``row`` (``columns`` only) to ``path``; ``fresh`` starts the file with a header."""
    import csv

    with open(path, "w" if fresh or not path.exists() else "a", newline="") as fh:
        w = csv.writer(fh)
        if fresh or fh.tell() == 0:
            w.writerow(columns)
        w.writerow([row[c] for c in columns])
