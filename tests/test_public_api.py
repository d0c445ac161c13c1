"""Public names: every algorithm entry point yields its class, config and named trainer at the
documented import paths, every ``__all__`` name resolves, and ``import rlox`` stays light."""
import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rlox
from rlox._builtins import builtin_algorithms
from rlox.plugins import ALGORITHM_REGISTRY

ALGOS = builtin_algorithms()
ALGORITHMS_DIR = Path(rlox.__file__).parent / "algorithms"


def test_every_algorithm_file_is_an_entry_point():
    import rlox.algorithms as algorithms

    bases = {m.rsplit(".", 1)[1] for m in algorithms._BASES.values()}
    files = {p.stem for p in ALGORITHMS_DIR.glob("*.py") if not p.stem.startswith("_")} - bases
    assert files == {a.module.rsplit(".", 1)[1] for a in ALGOS}, "an algorithm file lacks its pyproject.toml line"
    assert len({a.name for a in ALGOS}) == len(ALGOS) == len({a.cls for a in ALGOS})


@pytest.mark.parametrize("algo", ALGOS, ids=[a.name for a in ALGOS])
def test_algorithm_names_are_derived_from_its_entry_point(algo):
    import rlox.algorithms
    import rlox.trainer
    from rlox.config import config_for

    cls = ALGORITHM_REGISTRY.get(algo.name)
    assert cls.__name__ == algo.cls and cls.__module__ == algo.module
    assert getattr(rlox.algorithms, algo.cls) is cls and getattr(rlox, algo.cls) is cls
    assert config_for(algo.name) is cls.config_class
    if algo.trainer is None:                       # language-model algorithms train a model, not on an env
        assert not hasattr(rlox, f"{algo.cls}Trainer") and algo.name not in rlox.trainer.TRAINERS
    else:
        trainer = getattr(rlox.trainer, algo.trainer)
        assert trainer is getattr(rlox, algo.trainer) is rlox.trainer.TRAINERS[algo.name]
        assert trainer.__name__ == algo.trainer and trainer.algorithm == algo.name
        assert issubclass(trainer, rlox.trainer.Trainer)


def test_documented_import_paths():
    from rlox import PPO, PPOTrainer, Trainer  # noqa: F401
    from rlox.algorithms import SAC, Algorithm  # noqa: F401
    from rlox.config import PPOConfig, TrainingConfig
    from rlox.runner import TrainingConfig as RunnerTrainingConfig
    from rlox.trainer import DreamerV3Trainer, PPOTrainer as P2, RecurrentPPOTrainer

    assert P2 is PPOTrainer and TrainingConfig is RunnerTrainingConfig and PPO.config_class is PPOConfig
    assert (DreamerV3Trainer.algorithm, RecurrentPPOTrainer.algorithm) == ("dreamer", "recurrent_ppo")
    with pytest.raises(AttributeError, match="has no attribute 'PPOTrainr'"):
        rlox.PPOTrainr
    with pytest.raises(AttributeError, match="'rlox.algorithms' has no attribute 'Sac'"):
        importlib.import_module("rlox.algorithms").Sac


@pytest.mark.parametrize("module", ["rlox", "rlox.algorithms", "rlox.trainer", "rlox.config", "rlox.runner",
                                    "rlox.plugins", "rlox.logging", "rlox.callbacks"])
def test_all_names_resolve(module):
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing
    assert set(names) <= set(dir(mod))


def test_import_rlox_stays_light():
    code = ("import sys, rlox; heavy = [m for m in ('torch', 'importlib.metadata', 'rlox.trainer', 'rlox.algorithms')"
            " if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_derived_trainers_train(tmp_path):
    """The named trainers new with the derivation work like the rest: on-policy and offline."""
    from rlox import HybridPPOTrainer, TD3BCTrainer
    from rlox.offline import collect_dataset, pendulum_swingup_policy

    m = HybridPPOTrainer(env="CartPole-v1", seed=0, config={"n_envs": 2, "n_steps": 16}).train(64)
    assert m["timesteps"] == 64
    collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 200, seed=0, path=tmp_path / "p.npz")
    trainer = TD3BCTrainer(env="Pendulum-v1", dataset=str(tmp_path / "p.npz"), hidden=32, batch_size=32,
                           steps_per_iteration=10)
    assert trainer.train(total_timesteps=20)["timesteps"] == 20
    assert trainer.predict(np.zeros(3, np.float32)).shape == (1,)
