"""rlox.model_zoo: register / list / load, persistence, and validation errors."""
import json

import numpy as np
import pytest

from rlox import Trainer
from rlox.checkpointing import CheckpointError
from rlox.model_zoo import ModelCard, ModelZoo, ZooError, default_zoo_dir

SMALL = {"n_envs": 2, "n_steps": 16, "n_epochs": 1, "batch_size": 32}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "ppo_cartpole.pt"
    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config=SMALL)
    trainer.train(64)
    trainer.save(path)
    return path, trainer


def card(name="ppo-cartpole-v1", **kw):
    return ModelCard(**{"name": name, "algorithm": "ppo", "env": "CartPole-v1", "mean_reward": 500.0,
                        "description": "PPO agent trained to solve CartPole-v1", **kw})


def test_default_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("RLOX_MODEL_ZOO", str(tmp_path / "zoo"))
    assert default_zoo_dir() == tmp_path / "zoo"
    monkeypatch.delenv("RLOX_MODEL_ZOO")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_zoo_dir() == tmp_path / "data" / "rlox" / "model_zoo"


def test_class_level_round_trip(monkeypatch, tmp_path, checkpoint):
    path, trained = checkpoint
    monkeypatch.setenv("RLOX_MODEL_ZOO", str(tmp_path / "zoo"))
    stored = ModelZoo.register(card(tags=["classic"]), checkpoint_path=path)
    assert len(stored.checksum) == 64 and stored.hyperparameters["n_steps"] == 16 and stored.seed == 0
    assert stored.total_timesteps == 64
    assert [c.name for c in ModelZoo.list()] == ["ppo-cartpole-v1"]
    # Persisted as JSON beside the checkpoint; a new ModelZoo on the folder sees it.
    entry = tmp_path / "zoo" / "ppo-cartpole-v1"
    assert json.loads((entry / "card.json").read_text())["mean_reward"] == 500.0
    assert ModelZoo(tmp_path / "zoo").get("ppo-cartpole-v1").tags == ["classic"]
    trainer = ModelZoo.load("ppo-cartpole-v1")
    obs = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    np.testing.assert_array_equal(trainer.predict(obs, deterministic=True), trained.predict(obs, deterministic=True))
    assert trainer.card.name == "ppo-cartpole-v1"
    assert trainer.predict(obs[0], deterministic=True) in (0, 1)


def test_name_clash_and_overwrite(tmp_path, checkpoint):
    zoo = ModelZoo(tmp_path)
    zoo.register(card(), checkpoint[0])
    with pytest.raises(ZooError, match="a model named 'ppo-cartpole-v1' is already in the zoo"):
        zoo.register(card(mean_reward=1.0), checkpoint[0])
    zoo.register(card(mean_reward=1.0), checkpoint[0], overwrite=True)
    assert zoo.get("ppo-cartpole-v1").mean_reward == 1.0
    zoo.remove("ppo-cartpole-v1")
    assert zoo.list() == []


def test_validation_errors(tmp_path, checkpoint):
    zoo = ModelZoo(tmp_path)
    with pytest.raises(ValueError, match="ModelCard.name 'bad/name' is not allowed"):
        card(name="bad/name")
    with pytest.raises(ValueError, match="mean_reward must be a finite number"):
        card(mean_reward=float("nan"))
    with pytest.raises(ZooError, match="holds a 'ppo' model but the card says algorithm='a2c'"):
        zoo.register(card(algorithm="a2c"), checkpoint[0])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        zoo.register(card(), tmp_path / "none.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="corrupt or not a torch file"):
        zoo.register(card(), junk)
    zoo.register(card(), checkpoint[0])
    entry = tmp_path / "ppo-cartpole-v1"
    # Altered checkpoint: checksum mismatch names the file.
    data = bytearray((entry / "checkpoint.pt").read_bytes())
    data[-100] ^= 0xFF
    (entry / "checkpoint.pt").write_bytes(bytes(data))
    with pytest.raises(ZooError, match=r"checkpoint\.pt' does not match the checksum"):
        zoo.load("ppo-cartpole-v1")
    (entry / "checkpoint.pt").unlink()
    with pytest.raises(ZooError, match=r"checkpoint\.pt' is missing"):
        zoo.load("ppo-cartpole-v1")
    with pytest.raises(ZooError, match="no model named 'other' in the zoo .* available: ppo-cartpole-v1"):
        zoo.load("other")
    # A card in the wrong folder would clash with another entry's name.
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "card.json").write_text((entry / "card.json").read_text())
    with pytest.raises(ZooError, match="is named 'ppo-cartpole-v1' but lies in folder 'copy'"):
        zoo.list()
    (tmp_path / "copy" / "card.json").write_text("{not json")
    with pytest.raises(ZooError, match=r"card\.json' is not valid JSON"):
        zoo.get("copy")
