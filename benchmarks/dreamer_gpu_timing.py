"""DreamerV3 gradient updates on a CUDA GPU: wall seconds per update for each model size preset,
bfloat16 autocast beside float32 (what ``precision="auto"`` chooses between on CUDA).

Each size is built on Pendulum-v1 with the default batch (16 sequences of 64 steps, imagination
horizon 15), the replay filled by 1000 random steps, two warm-up updates, then ``--updates``
timed updates (``torch.cuda.synchronize`` around them). Prints one line per size and precision
and writes ``results/dreamer_gpu.md``; needs a CUDA device.

    python benchmarks/dreamer_gpu_timing.py --sizes XS S M L --updates 10
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS  # noqa: E402


def time_size(size: str, precision: str, n: int) -> tuple[float, int]:
    from rlox.algorithms.dreamer_v3 import DreamerV3

    algo = DreamerV3("Pendulum-v1", seed=0, size=size, device="cuda", precision=precision, learning_starts=1000,
                     train_ratio=1e-9)
    algo.train(total_timesteps=1000)          # fills the replay; train_ratio ~0: no updates yet
    for _ in range(2):
        algo._train_step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        algo._train_step()
    torch.cuda.synchronize()
    params = sum(p.numel() for m in (algo.world_model, algo.actor, algo.critic) for p in m.parameters())
    return (time.perf_counter() - t) / n, params


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["XS", "S", "M", "L"])
    ap.add_argument("--precisions", nargs="+", default=["bfloat16", "float32"])
    ap.add_argument("--updates", type=int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("dreamer_gpu_timing.py needs a CUDA device; torch sees none")
    name = torch.cuda.get_device_name(0)
    lines = [f"# DreamerV3 updates on {name}", "",
             f"Command: `python benchmarks/dreamer_gpu_timing.py --sizes {' '.join(args.sizes)} "
             f"--updates {args.updates}`; torch {torch.__version__}. Pendulum-v1, batch 16 x 64, horizon 15; "
             f"mean wall time of {args.updates} updates after 2 warm-ups (world model, imagination, actor and "
             f"critic).", "",
             "| size | parameters | precision | ms / update | updates / s |", "|---|---|---|---|---|"]
    for size in args.sizes:
        for precision in args.precisions:
            sec, params = time_size(size, precision, args.updates)
            print(f"{size:3} {precision:8} {params / 1e6:7.2f}M params  {1e3 * sec:8.1f} ms/update", flush=True)
            lines.append(f"| {size} | {params / 1e6:.2f}M | {precision} | {1e3 * sec:.1f} | {1 / sec:.1f} |")
    out = RESULTS / "dreamer_gpu.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
