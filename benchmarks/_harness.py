"""Shared timing and reporting for the side-by-side benchmarks.

Each benchmark script times rlox and its peers in the same process, prints a table of
ratios, and writes it to ``benchmarks/results/<name>.md`` (and ``.json``).

    table = Table("gae", "GAE kernels vs NumPy/TorchRL")
    t_rlox = measure(lambda: rlox.compute_gae(...))
    t_peer = measure(lambda: numpy_loop(...))
    table.add("compute_gae 2048", rlox=t_rlox, peer=t_peer, peer_name="python loop", goal=300)
    table.finish()
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

RESULTS = Path(__file__).resolve().parent / "results"
QUICK = os.environ.get("RLOX_BENCH_QUICK", "0") not in ("", "0")


def measure(fn: Callable[[], object], *, min_time: float = 0.2, repeats: int = 5,
            warmup: int = 1) -> float:
    """Median seconds per call of ``fn`` over ``repeats`` rounds of at least ``min_time`` each."""
    if QUICK:
        min_time, repeats = min_time / 4, max(2, repeats // 2)
    for _ in range(warmup):
        fn()
    # Calibrate the number of calls per round.
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time / 4 or n >= 1 << 20:
            break
        n *= 4
    per_round = max(1, int(n * (min_time / max(dt, 1e-9))))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(per_round):
            fn()
        samples.append((time.perf_counter() - t0) / per_round)
    return statistics.median(samples)


def fmt_time(seconds: float) -> str:
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


@dataclass
class Row:
    case: str
    rlox: float                 # seconds per call (or a rate when ``unit`` says so)
    peer: float | None
    peer_name: str
    goal: float | None          # ratio to reach (peer / rlox for times)
    unit: str = "time"          # "time": lower is better; otherwise a rate, higher is better
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.peer is None or self.peer == 0 or self.rlox == 0:
            return None
        if self.unit != "time" and self.rlox < 0 and self.peer < 0:
            return self.peer / self.rlox         # negative returns (costs): |peer| / |rlox|, > 1 when rlox is better
        return self.peer / self.rlox if self.unit == "time" else self.rlox / self.peer

    @property
    def met(self) -> str:
        if self.goal is None or self.ratio is None:
            return ""
        return "yes" if self.ratio >= self.goal else "NO"


@dataclass
class Table:
    name: str
    title: str
    rows: list[Row] = field(default_factory=list)

    def add(self, case: str, *, rlox: float, peer: float | None = None, peer_name: str = "",
            goal: float | None = None, unit: str = "time", note: str = "") -> Row:
        row = Row(case, rlox, peer, peer_name, goal, unit, note)
        self.rows.append(row)
        print(self._line(row), flush=True)
        return row

    def _value(self, v: float | None, unit: str) -> str:
        if v is None:
            return "-"
        return fmt_time(v) if unit == "time" else f"{v:,.0f} {unit}"

    def _line(self, r: Row) -> str:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        goal = f">= {r.goal:g}x {r.met}" if r.goal is not None else ""
        return (f"  {r.case:<44} rlox {self._value(r.rlox, r.unit):>16} | "
                f"{r.peer_name or '-':<24} {self._value(r.peer, r.unit):>16} | {ratio:>9} {goal}")

    def markdown(self) -> str:
        lines = [f"# {self.title}", "",
                 f"Machine: {platform.machine()}, {os.cpu_count()} cores, "
                 f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}",
                 "", "| case | rlox | peer | peer value | ratio | goal | met | note |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in self.rows:
            ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
            goal = f">= {r.goal:g}x" if r.goal is not None else ""
            lines.append(f"| {r.case} | {self._value(r.rlox, r.unit)} | {r.peer_name or '-'} | "
                         f"{self._value(r.peer, r.unit)} | {ratio} | {goal} | {r.met} | {r.note} |")
        return "\n".join(lines) + "\n"

    def finish(self) -> None:
        """Write the table to benchmarks/results/<name>.md and .json."""
        RESULTS.mkdir(parents=True, exist_ok=True)
        md = RESULTS / f"{self.name}.md"
        tmp = md.with_suffix(".md.tmp")
        tmp.write_text(self.markdown())
        os.replace(tmp, md)
        data = [dict(case=r.case, rlox=r.rlox, peer=r.peer, peer_name=r.peer_name,
                     ratio=r.ratio, goal=r.goal, met=r.met, unit=r.unit, note=r.note)
                for r in self.rows]
        (RESULTS / f"{self.name}.json").write_text(json.dumps(data, indent=2))
        print(f"wrote {md.relative_to(RESULTS.parent.parent)}")


def store_run(run: dict[str, Any], runs_path: Path, same: Callable[[dict[str, Any], dict[str, Any]], bool]
              ) -> None:
    """Add ``run`` to the JSON list in ``runs_path``, replacing any run ``same`` says is the same
    case, atomically (tmp file + ``os.replace``: a failed write never corrupts the file). A lock
    file serialises the read-modify-write, so benchmark processes run side by side (one per
    core) do not drop each other's runs."""
    import fcntl

    runs_path.parent.mkdir(parents=True, exist_ok=True)
    with open(runs_path.with_suffix(".json.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        mine = json.loads(runs_path.read_text()) if runs_path.is_file() else []
        mine = [r for r in mine if not same(r, run)] + [run]
        tmp = runs_path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(mine, indent=1))
        os.replace(tmp, runs_path)


def header(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def venv_python(venv: Path, packages: list[str], check: str) -> tuple[Path | None, str]:
    """The python of a peer's own venv at ``venv`` (for peers whose pins clash with ours), created
    on first use with ``pip install packages`` (under the repo's ``constraints.txt``) and reused
    while ``python -c check`` runs. Returns (python, "") or (None, why it could not be built)."""
    import subprocess
    import sys

    py = venv / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", check], capture_output=True).returncode == 0:
        return py, ""
    print(f"creating {venv} ({' '.join(packages)}) ...", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    constraints = Path(__file__).resolve().parent.parent / "constraints.txt"
    for cmd in ([base, "-m", "venv", str(venv)],
                [str(py), "-m", "pip", "install", "-q", *packages, "-c", str(constraints)],
                [str(py), "-c", check]):
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"`{' '.join(cmd[-3:])}` failed: {tail[0][:200]}"
    return py, ""
