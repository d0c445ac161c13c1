"""Policy server load test on loopback: requests/s and p50/p99 latency, single and batched requests.

    .venv/bin/python benchmarks/bench_serve.py [--requests 2000] [--seconds 10]

Starts ``python -m rlox serve`` (uvicorn, one worker) on 127.0.0.1 with the inference artifacts of
a CartPole PPO policy, then drives ``POST /predict`` from client threads, each on its own
keep-alive connection, bounded by a request count and a time limit per case. The in-process
``InferencePolicy.act`` latency of the same request is shown beside it (what HTTP + JSON add).
Writes ``benchmarks/results/serve.md`` and ``serve.json``.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the server did not answer /health in time")


def load(port: int, body: bytes, *, clients: int, max_requests: int, max_seconds: float) -> dict:
    """``clients`` threads send ``body`` until ``max_requests`` in all or ``max_seconds`` pass."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    sent = [0]
    deadline = time.monotonic() + max_seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine = []
        while time.monotonic() < deadline:
            with lock:
                if sent[0] >= max_requests:
                    break
                sent[0] += 1
            t0 = time.perf_counter()
            conn.request("POST", "/predict", body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            mine.append(time.perf_counter() - t0)
            if r.status != 200:
                with lock:
                    errors[0] += 1
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat = np.asarray(latencies) * 1e3
    return {"requests": len(latencies), "errors": errors[0], "seconds": wall, "req_per_s": len(latencies) / wall,
            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2000, help="requests per case (bound)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per case (bound)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from rlox import __version__
    from rlox.artifacts import export_inference
    from rlox.inference import InferencePolicy
    from rlox.trainer import Trainer

    tmp = Path(tempfile.mkdtemp(prefix="rlox-bench-serve-"))
    export_inference(Trainer("ppo", env="CartPole-v1", seed=0).algo, tmp / "artifacts")
    policy = InferencePolicy.load(tmp / "artifacts")
    rng = np.random.default_rng(0)
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "rlox", "serve", str(tmp / "artifacts"), "--port", str(port),
                             "--log-level", "warning"], env=env)
    rows = []
    try:
        wait_healthy(port, proc)
        for batch in (1, 64):
            obs = rng.normal(size=(batch, 4)).round(5)
            payload = obs[0].tolist() if batch == 1 else obs.tolist()
            body = json.dumps({"obs": payload}).encode()
            t0 = time.perf_counter()
            n_direct = 2000
            for _ in range(n_direct):
                policy.act(np.asarray(payload))
            direct_us = (time.perf_counter() - t0) / n_direct * 1e6
            load(port, body, clients=1, max_requests=100, max_seconds=2.0)  # warm-up
            for clients in (1, 4):
                res = load(port, body, clients=clients, max_requests=args.requests, max_seconds=args.seconds)
                res.update(batch=batch, clients=clients, obs_per_s=res["req_per_s"] * batch,
                           in_process_act_us=direct_us, body_bytes=len(body))
                rows.append(res)
                print(f"batch {batch:3d}  clients {clients}: {res['req_per_s']:8.0f} req/s  "
                      f"{res['obs_per_s']:9.0f} obs/s  p50 {res['p50_ms']:.2f} ms  p99 {res['p99_ms']:.2f} ms  "
                      f"({res['requests']} requests, {res['errors']} errors; in-process act {direct_us:.0f} us)")
    finally:
        proc.terminate()
        proc.wait(10)

    stamp = time.strftime("%Y-%m-%d %H:%M")
    lines = [
        "# Policy server on loopback (rlox serve: FastAPI + uvicorn, one worker)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs; load average "
        f"{os.getloadavg()[0]:.1f} at the end), Python "
        f"{platform.python_version()}, rlox {__version__}, {stamp}. Policy: PPO CartPole-v1 MLP 64x64 "
        f"(inference artifacts). Bounds per case: {args.requests} requests or {args.seconds:g} s. "
        "Clients are threads in one process, each with a keep-alive connection; client and server share the "
        "machine's cores.",
        "",
        "| obs per request | clients | requests | req/s | obs/s | p50 | p99 | errors | in-process act |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['clients']} | {r['requests']} | {r['req_per_s']:,.0f} | "
                     f"{r['obs_per_s']:,.0f} | {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | {r['errors']} | "
                     f"{r['in_process_act_us']:.0f} us |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "serve.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "serve.json").write_text(json.dumps({"date": stamp, "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS / 'serve.md'}")


if __name__ == "__main__":
    main()
