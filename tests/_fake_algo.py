"""A minimal algorithm class with the interface Trainer expects (for Trainer/CLI tests that must
not depend on training speed): config dataclass, train/predict/save/load."""
from dataclasses import asdict, dataclass

import numpy as np
import torch


@dataclass
class FakeConfig:
    n_envs: int = 8
    n_steps: int = 128
    n_epochs: int = 4
    batch_size: int = 256
    gamma: float = 0.99
    gae_lambda: float = 0.95
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    clip_eps: float = 0.2
    ent_coef: float = 0.01

    def __post_init__(self):
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")


class FakeAlgo:
    config_class = FakeConfig
    instances = []

    def __init__(self, env_id, *, seed=0, callbacks=None, logger=None, device="cpu", **kwargs):
        self.env_id, self.seed, self.callbacks, self.logger, self.device = env_id, seed, callbacks, logger, device
        self.config = FakeConfig(**kwargs)
        self.bias = float(seed)
        self.timesteps = 0
        FakeAlgo.instances.append(self)

    def train(self, total_timesteps):
        self.timesteps += total_timesteps
        self.bias += 1.0
        return {"mean_reward": 9.5, "episodes": 3, "timesteps": self.timesteps, "sps": 1000.0}

    def predict(self, obs, deterministic=False):
        obs = np.asarray(obs, dtype=np.float32)
        score = obs.sum(-1) + self.bias
        return (score > 0).astype(np.int64)

    def save(self, path):
        torch.save({"bias": torch.tensor(self.bias), "config": asdict(self.config),
                    "env_id": self.env_id}, path)

    @classmethod
    def load(cls, path, env_id=None):
        state = torch.load(path, weights_only=True)
        algo = cls(env_id or state["env_id"], **state["config"])
        algo.bias = float(state["bias"])
        return algo
