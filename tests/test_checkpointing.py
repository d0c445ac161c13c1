"""Checkpoint security and durability: pickled code is refused, saves are atomic, resume is exact."""
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlox import Trainer
from rlox.algorithms.a2c import A2C
from rlox.algorithms.ppo import PPO
from rlox.callbacks import CheckpointCallback
from rlox.checkpointing import CheckpointError, atomic_torch_save, atomic_write_text, safe_torch_load

SMALL = {"n_envs": 4, "n_steps": 32, "n_epochs": 2, "batch_size": 64}


class Payload:
    """Unpickling this runs code: it writes the marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_malicious_checkpoint_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned.txt"
    evil = tmp_path / "model.pt"
    torch.save({"weights": torch.zeros(2), "extra": Payload(marker)}, evil)
    # Sanity: the file really runs code when unpickled unsafely (in a throwaway process).
    subprocess.run([sys.executable, "-c", f"import torch; torch.load({str(evil)!r}, weights_only=False)"],
                   check=True, timeout=120)
    assert marker.read_text() == "pwned"
    marker.unlink()
    with pytest.raises(CheckpointError, match=r"refusing to load .*model\.pt'.*could run arbitrary code"):
        safe_torch_load(evil)
    with pytest.raises(CheckpointError, match="refusing to load"):
        PPO.load(evil)
    with pytest.raises(CheckpointError, match="refusing to load"):
        Trainer.from_checkpoint(evil, algorithm="ppo", env="CartPole-v1")
    # A bare pickle stream (not torch's zip format) is refused as well.
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointError):
        safe_torch_load(raw)
    assert not marker.exists()


def test_corrupt_and_foreign_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        safe_torch_load(tmp_path / "none.pt")
    trunc = tmp_path / "trunc.pt"
    atomic_torch_save({"w": torch.ones(1000)}, trunc)
    trunc.write_bytes(trunc.read_bytes()[:300])
    with pytest.raises(CheckpointError, match=r"trunc\.pt' is corrupt or not a torch file"):
        safe_torch_load(trunc)
    bare = tmp_path / "bare.pt"
    torch.save({"w": torch.ones(3)}, bare)
    with pytest.raises(CheckpointError, match="is not an rlox checkpoint"):
        PPO.load(bare)


def _files(path):
    return sorted(p.name for p in path.iterdir())


def test_crash_during_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    algo = PPO("CartPole-v1", seed=0, **SMALL)
    algo.train(128)
    path = tmp_path / "model.pt"
    algo.save(path)
    before = path.read_bytes()
    algo.train(128)

    def crashing_save(obj, f, *args, **kwargs):
        with open(f, "wb") as fh:
            fh.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(torch, "save", crashing_save)
    with pytest.raises(OSError, match="disk full"):
        algo.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before and _files(tmp_path) == ["model.pt"]   # no temp file left
    assert safe_torch_load(path)["counters"]["num_timesteps"] == 128


def test_killed_process_during_save_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "model.pt"
    atomic_write_text("previous", tmp_path / "note.txt")
    atomic_torch_save({"step": 1, "w": torch.zeros(4)}, path)
    before = path.read_bytes()
    code = (
        "import os, torch\n"
        "from rlox.checkpointing import atomic_torch_save\n"
        "real = torch.save\n"
        "def dying(obj, f, *a, **k):\n"
        "    real(obj, f, *a, **k)\n"
        "    with open(f, 'r+b') as fh: fh.truncate(100)\n"
        "    os._exit(9)\n"                                  # the process dies mid-save, no cleanup
        "torch.save = dying\n"
        f"atomic_torch_save({{'step': 2, 'w': torch.ones(1000)}}, {str(path)!r})\n")
    out = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert out.returncode == 9
    assert path.read_bytes() == before and safe_torch_load(path)["step"] == 1
    leftovers = [n for n in _files(tmp_path) if n.endswith(".tmp")]
    assert len(leftovers) == 1 and leftovers[0].startswith(".model.pt.")    # only a stray temp file


@pytest.mark.parametrize("algo_cls, config", [
    (PPO, dict(SMALL, compiled_update=True)), (PPO, dict(SMALL, compiled_update=False)),
    (A2C, {"n_envs": 4, "n_steps": 8})], ids=["ppo-compiled", "ppo-torch", "a2c"])
def test_resume_equals_uninterrupted_run(tmp_path, algo_cls, config):
    total = 2048 if algo_cls is PPO else 1024
    ck = CheckpointCallback(save_freq=total // 2, save_path=tmp_path)
    full = algo_cls("CartPole-v1", seed=3, callbacks=[ck], **config)
    full.train(total)
    mid = ck.saved[0]
    assert safe_torch_load(mid)["counters"]["num_timesteps"] == total // 2
    resumed = algo_cls.load(mid)
    assert resumed.num_timesteps == total // 2 and resumed.remaining_timesteps == total // 2
    resumed.train(resume=True)
    assert resumed.num_timesteps == full.num_timesteps == total
    for (name, a), (_, b) in zip(full.policy.state_dict().items(), resumed.policy.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    # the optimizers' state as a checkpoint holds it (PPO's compiled update keeps Adam's moments
    # in its kernel and writes them into the torch optimizer for checkpoints)
    opt_a = full._state_dict()["optimizers"]["policy"]["state"]
    opt_b = resumed._state_dict()["optimizers"]["policy"]["state"]
    assert len(opt_a) == len(opt_b) > 0
    for k in opt_a:
        for key in opt_a[k]:
            torch.testing.assert_close(opt_a[k][key], opt_b[k][key], rtol=0, atol=0)
    assert full.optimizers["policy"].param_groups[0]["lr"] == resumed.optimizers["policy"].param_groups[0]["lr"]
    assert full.torch_gen.get_state().equal(resumed.torch_gen.get_state())
    assert list(full.episode_returns) == list(resumed.episode_returns) and full.episodes == resumed.episodes
    with pytest.raises(ValueError, match="nothing to resume"):
        resumed.train(resume=True)


def test_resume_through_the_trainer(tmp_path):
    from rlox.callbacks import Callback

    class CrashAt(Callback):        # stands in for a run that dies after its 512-step checkpoint
        def on_update(self, metrics):
            return self.num_timesteps < 512

    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config=SMALL,
                      callbacks=[CheckpointCallback(save_freq=512, save_path=tmp_path), CrashAt()])
    trainer.train(1024)
    assert trainer.algo.num_timesteps == 512
    loaded = Trainer.from_checkpoint(tmp_path / "rl_model_512_steps.pt", algorithm="ppo")
    assert loaded.train(resume=True)["timesteps"] == 1024
    uninterrupted = Trainer("ppo", env="CartPole-v1", seed=0, config=SMALL)
    uninterrupted.train(1024)
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True),
                                  uninterrupted.predict(obs, deterministic=True))
