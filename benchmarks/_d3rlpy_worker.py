"""d3rlpy side of benchmarks/bench_offline.py; runs inside the bench's own venv (d3rlpy 2.8.1
pins gymnasium 1.0.0). Reads a JSON job on argv[1] and prints one ``RESULT {json}`` line, or with
``--serve`` reads one job per stdin line and answers each (one process for the whole bench, so
d3rlpy is imported once).

Job: {"mode": "throughput"|"learn"|"curve", "algo": "td3_bc"|"iql"|"cql"|"bc", "npz": path, "steps": int,
      "hidden": int, "batch_size": int, "seed": int, "low": [...], "high": [...] (action bounds),
      "policy": path (learn: where the greedy policy is saved as TorchScript, observation and
      action scalers included, so the bench evaluates it with the same episodes as rlox's; curve: saved
      as ``policy-<step>.pt`` every ``every`` steps), "cql_gap": float (CQL's alpha_threshold; 0: no
      Lagrangian, a fixed weight)}
"""
import json
import sys
import time

import numpy as np
import torch


def make(job, low, high):
    import d3rlpy
    from d3rlpy.models.encoders import VectorEncoderFactory
    from d3rlpy.preprocessing import MinMaxActionScaler, StandardObservationScaler

    enc = VectorEncoderFactory(hidden_units=[job["hidden"], job["hidden"]])
    common = dict(batch_size=job["batch_size"],
                  action_scaler=MinMaxActionScaler(minimum=low, maximum=high))
    algo = job["algo"]
    if algo == "td3_bc":   # TD3+BC normalises observations (as rlox's normalize_obs=True)
        cfg = d3rlpy.algos.TD3PlusBCConfig(actor_encoder_factory=enc, critic_encoder_factory=enc, alpha=2.5,
                                           actor_learning_rate=3e-4, critic_learning_rate=3e-4,
                                           observation_scaler=StandardObservationScaler(), **common)
    elif algo == "iql":
        cfg = d3rlpy.algos.IQLConfig(actor_encoder_factory=enc, critic_encoder_factory=enc,
                                     value_encoder_factory=enc, expectile=0.7, weight_temp=3.0, max_weight=100.0,
                                     actor_learning_rate=3e-4, critic_learning_rate=3e-4,
                                     observation_scaler=StandardObservationScaler(), **common)
    elif algo == "cql":    # d3rlpy's CQL is Lagrangian by default (alpha_threshold 10); its multiplier
        # learns at rlox's (and CQL's own code's) critic rate 3e-4 rather than d3rlpy's default 1e-4.
        # cql_gap 0: no Lagrangian (alpha_learning_rate 0 keeps alpha at 1: a fixed weight 5)
        gap = float(job.get("cql_gap", 10.0))
        cfg = d3rlpy.algos.CQLConfig(actor_encoder_factory=enc, critic_encoder_factory=enc, conservative_weight=5.0,
                                     n_action_samples=10, alpha_threshold=gap, actor_learning_rate=1e-4,
                                     critic_learning_rate=3e-4, alpha_learning_rate=3e-4 if gap > 0 else 0.0,
                                     temp_learning_rate=1e-4,
                                     initial_alpha=1.0, initial_temperature=1.0, **common)
    elif algo == "bc":
        cfg = d3rlpy.algos.BCConfig(encoder_factory=enc, learning_rate=1e-3, policy_type="deterministic", **common)
    else:
        raise SystemExit(f"unknown algo {algo}")
    return cfg.create(device="cpu:0")


def run(job):
    import d3rlpy
    from d3rlpy.dataset import MDPDataset
    from d3rlpy.logging import NoopAdapterFactory

    d3rlpy.seed(job["seed"])
    z = np.load(job["npz"])
    ds = MDPDataset(z["observations"], z["actions"], z["rewards"], z["terminals"], timeouts=z["timeouts"])
    low, high = np.asarray(job["low"], np.float32), np.asarray(job["high"], np.float32)
    algo = make(job, low, high)
    algo.build_with_dataset(ds)
    every = job.get("every", job["steps"])   # curve: the greedy policy saved every `every` steps

    def save(algo, epoch, total_step):
        if job["mode"] == "curve":
            algo.save_policy(job["policy"].replace(".pt", f"-{total_step}.pt"))

    t0 = time.perf_counter()
    history = algo.fit(ds, n_steps=job["steps"], n_steps_per_epoch=every, show_progress=False,
                       save_interval=10**9, logger_adapter=NoopAdapterFactory(), epoch_callback=save)
    elapsed = time.perf_counter() - t0
    out = {"steps_per_s": job["steps"] / elapsed, "seconds": elapsed, "d3rlpy": d3rlpy.__version__,
           "metrics": [{k: float(v) for k, v in m.items()} for _, m in history]}
    if job["mode"] == "learn":
        algo.save_policy(job["policy"])
    return out


def main():
    torch.set_num_threads(1)
    if sys.argv[1] == "--serve":
        for line in sys.stdin:
            if line.strip():
                print("RESULT " + json.dumps(run(json.loads(line))), flush=True)
    else:
        print("RESULT " + json.dumps(run(json.loads(sys.argv[1]))), flush=True)


if __name__ == "__main__":
    main()
