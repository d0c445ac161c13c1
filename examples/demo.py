"""`make demo`: train PPO on CartPole-v1 with the tuned preset, then evaluate it.

The guide's three lines, plus an evaluation over 10 deterministic episodes:

    trainer = Trainer("ppo", env="CartPole-v1", seed=42)
    metrics = trainer.train(total_timesteps=50_000)

Runs in well under two minutes on two cores. Pass a number to change the budget:
    .venv/bin/python examples/demo.py 100000
"""
import sys
import time

from rlox import Trainer
from rlox.evaluation import evaluate_policy


def main(total_timesteps: int = 50_000) -> None:
    trainer = Trainer("ppo", env="CartPole-v1", seed=42)
    print(f"training PPO on CartPole-v1 for {total_timesteps:,} steps with the RL Zoo preset")
    print("config:", ", ".join(f"{k}={v}" for k, v in sorted(trainer.config.items())))
    t0 = time.perf_counter()
    metrics = trainer.train(total_timesteps=total_timesteps)
    dt = time.perf_counter() - t0
    print(f"Mean reward: {metrics['mean_reward']:.1f} (last training episodes), "
          f"{metrics['episodes']} episodes, {total_timesteps / dt:,.0f} steps/s, {dt:.1f} s")
    res = evaluate_policy(trainer, "CartPole-v1", n_episodes=10, deterministic=True, seed=0)
    print(f"evaluation: {res['mean_reward']:.1f} +- {res['std_reward']:.1f} "
          f"over {res['n_episodes']} deterministic episodes (500 is the maximum)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
