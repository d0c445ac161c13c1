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
        zoo.register(card(mean_reward=1.0), checkpoint[0], overwrite=False)
    assert zoo.get("ppo-cartpole-v1").mean_reward == 500.0
    with pytest.raises(TypeError, match="overwrite must be True or False, got 'yes'"):
        zoo.register(card(), checkpoint[0], overwrite="yes")
    zoo.register(card(mean_reward=1.0), checkpoint[0], overwrite=True)
    assert zoo.get("ppo-cartpole-v1").mean_reward == 1.0
    zoo.remove("ppo-cartpole-v1")
    assert zoo.list() == []


def test_reregister_replaces_and_keeps_history(tmp_path, checkpoint):
    zoo = ModelZoo(tmp_path)
    first = zoo.register(card(description="first", tags=["a"]), checkpoint[0])
    second = zoo.register(card(mean_reward=250.0, description="second"), checkpoint[0])
    third = zoo.register(card(mean_reward=480.0, description="third"), checkpoint[0])
    assert first.history == [] and [h["description"] for h in second.history] == ["first"]
    stored = zoo.get("ppo-cartpole-v1")
    assert stored.mean_reward == 480.0 and stored == third
    # Oldest first; each entry is the replaced card's metadata (without its own history).
    assert [h["mean_reward"] for h in stored.history] == [500.0, 250.0]
    assert stored.history[0]["tags"] == ["a"] and stored.history[0]["checksum"] == first.checksum
    assert all("history" not in h for h in stored.history)
    # No staging or replaced folders are left behind; the entry loads.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ppo-cartpole-v1"]
    assert zoo.load("ppo-cartpole-v1").predict(np.zeros(4, np.float32), deterministic=True) in (0, 1)


def test_reregister_failure_leaves_old_entry(tmp_path, checkpoint, monkeypatch):
    import rlox.model_zoo as mz

    zoo = ModelZoo(tmp_path)
    zoo.register(card(), checkpoint[0])
    before = (tmp_path / "ppo-cartpole-v1" / "card.json").read_text()

    def boom(*a, **k):
        raise OSError("disk full")

    # Writing the new card fails: the old entry is untouched, the staging folder is gone.
    monkeypatch.setattr(mz, "atomic_write_text", boom)
    with pytest.raises(OSError, match="disk full"):
        zoo.register(card(mean_reward=1.0), checkpoint[0])
    monkeypatch.undo()
    assert (tmp_path / "ppo-cartpole-v1" / "card.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ppo-cartpole-v1"]
    # The swap's second rename fails: the old entry is renamed back.
    real_rename = mz.os.rename

    def rename(a, b):
        if ".staging-" in str(a):
            raise OSError("rename failed")
        real_rename(a, b)

    monkeypatch.setattr(mz.os, "rename", rename)
    with pytest.raises(OSError, match="rename failed"):
        zoo.register(card(mean_reward=2.0), checkpoint[0])
    monkeypatch.undo()
    assert zoo.get("ppo-cartpole-v1").mean_reward == 500.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ppo-cartpole-v1"]
    # A process that died between the two renames left the old entry aside: it comes back.
    (tmp_path / "ppo-cartpole-v1").rename(tmp_path / ".replaced-ppo-cartpole-v1-abc")
    assert zoo.get("ppo-cartpole-v1").mean_reward == 500.0
    assert [c.name for c in zoo.list()] == ["ppo-cartpole-v1"]


def test_reregister_refuses_corrupt_card(tmp_path, checkpoint):
    zoo = ModelZoo(tmp_path)
    zoo.register(card(), checkpoint[0])
    path = tmp_path / "ppo-cartpole-v1" / "card.json"
    path.write_text("{not json")
    with pytest.raises(ZooError, match=r"cannot replace model 'ppo-cartpole-v1': its existing entry is corrupt "
                                       r"\(model card .*card\.json' is not valid JSON"):
        zoo.register(card(mean_reward=1.0), checkpoint[0])
    assert path.read_text() == "{not json"          # left as it was, for inspection
    with pytest.raises(ZooError, match="is not valid JSON"):
        zoo.load("ppo-cartpole-v1")
    data = card().to_dict()
    data["mean_reward"] = "lots"
    path.write_text(json.dumps(data))
    with pytest.raises(ZooError, match="existing entry is corrupt .*mean_reward must be a finite number"):
        zoo.register(card(), checkpoint[0])
    with pytest.raises(ValueError, match="ModelCard.history must be a list of dicts"):
        card(history=["x"])
    zoo.remove("ppo-cartpole-v1")               # a corrupt entry can be removed, then registered afresh
    assert zoo.register(card(), checkpoint[0]).history == []


def test_guide_model_zoo_sample_runs_twice(tmp_path, monkeypatch, checkpoint):
    monkeypatch.setenv("RLOX_MODEL_ZOO", str(tmp_path / "zoo"))
    for mean in (500.0, 450.0):
        ModelZoo.register(card(mean_reward=mean), checkpoint_path=checkpoint[0])
    assert [c.mean_reward for c in ModelZoo.list()] == [450.0]
    assert ModelZoo.get("ppo-cartpole-v1").history[0]["mean_reward"] == 500.0


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
