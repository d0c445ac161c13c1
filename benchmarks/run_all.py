"""Run every benchmarks/bench_*.py in turn (each compares rlox with its peers side by side).

    python benchmarks/run_all.py            # all of them
    python benchmarks/run_all.py gae envs   # only bench_gae.py and bench_envs.py
    RLOX_BENCH_QUICK=1 python benchmarks/run_all.py   # shorter timings
"""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        wanted = set(argv)
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
    failed = []
    for script in scripts:
        print(f"\n######## {script.name}", flush=True)
        if subprocess.call([sys.executable, str(script)]) != 0:
            failed.append(script.name)
    if failed:
        print(f"\nbenchmarks that failed: {', '.join(failed)}")
        return 1
    print(f"\nall {len(scripts)} benchmark scripts ran; tables in benchmarks/results/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
