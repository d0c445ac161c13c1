"""A local model zoo: trained agents with their metadata, loadable by name.

    from rlox.model_zoo import ModelZoo, ModelCard
    card = ModelCard(name="ppo-cartpole-v1", algorithm="ppo", env="CartPole-v1", mean_reward=500.0,
                     description="PPO agent trained to solve CartPole-v1")
    ModelZoo.register(card, checkpoint_path="checkpoints/ppo_cartpole.pt")
    for card in ModelZoo.list():
        print(f"{card.name}: {card.mean_reward:.1f}")
    trainer = ModelZoo.load("ppo-cartpole-v1")          # a Trainer, ready for predict
    action = trainer.predict(obs, deterministic=True)

The zoo is a directory: ``<root>/<name>/card.json`` beside ``<root>/<name>/checkpoint.pt``.
The default root is ``$RLOX_MODEL_ZOO`` when set, else ``rlox/model_zoo`` under the user's data
directory (``$XDG_DATA_HOME`` or ``~/.local/share`` on Linux, ``~/Library/Application Support``
on macOS, ``%LOCALAPPDATA%`` on Windows). ``ModelZoo(root)`` opens another one; the class-level
calls (``ModelZoo.register``, ``ModelZoo.list``, ``ModelZoo.load``) use the default.

Registering checks that the checkpoint is an rlox checkpoint of the card's algorithm (read
with ``weights_only=True``) and records its SHA-256; loading checks the card, the file and the
checksum, so a missing or altered file is an error that names it.

Registering a name that is already in the zoo replaces that entry (re-running a script that
registers a retrained model is normal use; ``overwrite=False`` refuses instead). The new entry
is built beside the old one and swapped in by renaming folders, so a failure at any point
leaves either the old entry or the new one, never a mix; the new card's ``history`` keeps the
replaced cards' metadata, newest last. An existing entry whose card is corrupt is never
replaced silently: ``register`` raises, and ``remove`` clears it once inspected.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from rlox.checkpointing import CheckpointError, atomic_write_text, safe_torch_load

__all__ = ["ModelCard", "ModelZoo", "ZooError", "default_zoo_dir", "CARD_FILE", "CHECKPOINT_FILE"]

CARD_FILE = "card.json"
CHECKPOINT_FILE = "checkpoint.pt"
CARD_FORMAT = "rlox-model-card"
CARD_VERSION = 2    # 2: ``history`` (the cards a re-register replaced)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class ZooError(ValueError):
    """A model zoo entry is invalid: bad card, name clash, missing file, checksum mismatch."""


def default_zoo_dir() -> Path:
    """``$RLOX_MODEL_ZOO``, else ``rlox/model_zoo`` under the platform's user data directory."""
    env = os.environ.get("RLOX_MODEL_ZOO")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "rlox" / "model_zoo"


@dataclass
class ModelCard:
    """Metadata of a zoo model.

    Args:
        name: unique name: letters, digits, '.', '_' or '-' (it is the entry's folder name).
        algorithm: registered algorithm name of the checkpoint ("ppo", ...).
        env: env id the model was trained on.
        mean_reward: its mean evaluation return.
        description: free text.
        hyperparameters: the config it was trained with (default: read from the checkpoint).
        std_reward, n_eval_episodes, total_timesteps, seed: optional evaluation/training facts.
        tags: free-form labels.
        extra: anything else JSON can hold.
    Set by ``register``: ``checksum`` (SHA-256 of the checkpoint), ``created``, ``rlox_version``,
    and ``history``: the metadata of the cards this entry replaced (oldest first, each without
    its own history).
    """

    name: str
    algorithm: str
    env: str
    mean_reward: float
    description: str = ""
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    std_reward: float | None = None
    n_eval_episodes: int | None = None
    total_timesteps: int | None = None
    seed: int | None = None
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    checksum: str | None = None
    created: str | None = None
    rlox_version: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"ModelCard.name {self.name!r} is not allowed; use 1-128 letters, digits, '.', '_' "
                             f"or '-', starting with a letter or digit")
        for key in ("algorithm", "env"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise ValueError(f"ModelCard.{key} must be a non-empty string, got {getattr(self, key)!r}")
        if isinstance(self.mean_reward, bool) or not isinstance(self.mean_reward, (int, float)) \
                or not math.isfinite(self.mean_reward):
            raise ValueError(f"ModelCard.mean_reward must be a finite number, got {self.mean_reward!r}")
        self.mean_reward = float(self.mean_reward)
        if not isinstance(self.hyperparameters, dict) or not isinstance(self.extra, dict):
            raise ValueError("ModelCard.hyperparameters and extra must be dicts")
        if not isinstance(self.history, list) or not all(isinstance(h, dict) for h in self.history):
            raise ValueError(f"ModelCard.history must be a list of dicts (earlier cards' metadata), "
                             f"got {self.history!r}")
        try:
            json.dumps(self.to_dict())
        except (TypeError, ValueError) as exc:
            raise ValueError(f"ModelCard {self.name!r} holds a value JSON cannot store: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"format": CARD_FORMAT, "version": CARD_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "card") -> "ModelCard":
        if not isinstance(data, Mapping) or data.get("format") != CARD_FORMAT:
            raise ZooError(f"{source} is not an rlox model card (no 'format: {CARD_FORMAT}')")
        if int(data.get("version", 0)) > CARD_VERSION:
            raise ZooError(f"{source} has card version {data.get('version')}, newer than this rlox understands")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in data if k not in names and k not in ("format", "version"))
        if unknown:
            raise ZooError(f"{source} has unknown keys {unknown}")
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except (TypeError, ValueError) as exc:
            raise ZooError(f"{source} is invalid: {exc}") from None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _ZooMethod:
    """A method callable on the class (default zoo) or on an instance (that zoo)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, cls: type) -> Any:
        target = obj if obj is not None else cls()

        def bound(*args: Any, **kwargs: Any) -> Any:
            return self.fn(target, *args, **kwargs)

        bound.__doc__ = self.fn.__doc__
        bound.__name__ = self.fn.__name__
        return bound


class ModelZoo:
    """A directory of models (default: ``default_zoo_dir()``); see the module docstring.

    Args:
        root: the zoo directory (created on first ``register``).
    """

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = Path(root).expanduser() if root is not None else default_zoo_dir()

    def _entry(self, name: str) -> Path:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ZooError(f"model name {name!r} is not allowed; use letters, digits, '.', '_' or '-'")
        return self.root / name

    @_ZooMethod
    def register(self, card: ModelCard, checkpoint_path: str | os.PathLike, *, overwrite: bool = True) -> ModelCard:
        """Copy ``checkpoint_path`` into the zoo under ``card.name`` and write its card.

        The checkpoint must be an rlox checkpoint (``Trainer.save``) of ``card.algorithm``;
        ``hyperparameters`` default to its config. Returns the stored card (with checksum).

        When ``card.name`` is already in the zoo the entry is replaced atomically and the old
        card's metadata is appended to the new card's ``history`` (``overwrite=False``: raise
        instead).

        Raises:
            ZooError: the name is taken and ``overwrite=False``; the existing entry's card is
                corrupt (it is never replaced silently; inspect it, then ``remove`` it); the
                checkpoint is of another algorithm. FileNotFoundError / CheckpointError: bad checkpoint.
        """
        if not isinstance(card, ModelCard):
            raise TypeError(f"register needs a ModelCard, got {type(card).__name__}")
        if not isinstance(overwrite, bool):
            raise TypeError(f"overwrite must be True or False, got {overwrite!r}")
        src = Path(checkpoint_path)
        if not src.is_file():
            raise FileNotFoundError(f"checkpoint {str(src)!r} does not exist")
        ckpt = safe_torch_load(src)
        if not isinstance(ckpt, dict) or ckpt.get("format") != "rlox-checkpoint":
            raise CheckpointError(f"{str(src)!r} is not an rlox checkpoint (save it with Trainer.save)")
        if str(ckpt.get("algorithm", "")).lower() != card.algorithm.lower():
            raise ZooError(f"{str(src)!r} holds a {ckpt.get('algorithm')!r} model but the card says "
                           f"algorithm={card.algorithm!r}")
        entry = self._entry(card.name)
        self._recover(card.name)
        history: list[dict[str, Any]] = []
        if entry.exists():
            if not overwrite:
                raise ZooError(f"a model named {card.name!r} is already in the zoo at {str(entry)!r}; choose "
                               f"another name or pass overwrite=True to replace it")
            try:
                old = self._read_card(entry)
            except ZooError as exc:
                raise ZooError(f"cannot replace model {card.name!r}: its existing entry is corrupt ({exc}); "
                               f"inspect {str(entry)!r}, then ModelZoo.remove({card.name!r}) and register "
                               f"again") from None
            old_meta = {k: v for k, v in dataclasses.asdict(old).items() if k != "history"}
            history = [*old.history, old_meta]
        self.root.mkdir(parents=True, exist_ok=True)
        # Build the new entry in a hidden staging folder beside the old one, then swap folders.
        tag = uuid.uuid4().hex[:12]
        staging = self.root / f".staging-{card.name}-{tag}"
        staging.mkdir()
        try:
            shutil.copyfile(src, staging / CHECKPOINT_FILE)
            from rlox import __version__

            stored = dataclasses.replace(
                card, hyperparameters=dict(card.hyperparameters) or dict(ckpt.get("config") or {}),
                seed=card.seed if card.seed is not None else ckpt.get("seed"),
                total_timesteps=card.total_timesteps if card.total_timesteps is not None
                else (ckpt.get("counters") or {}).get("num_timesteps"),
                checksum=_sha256(staging / CHECKPOINT_FILE), created=time.strftime("%Y-%m-%dT%H:%M:%S"),
                rlox_version=__version__, history=history)
            atomic_write_text(json.dumps(stored.to_dict(), indent=2), staging / CARD_FILE)
            self._swap_in(staging, entry, tag)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return stored

    def _swap_in(self, staging: Path, entry: Path, tag: str) -> None:
        """Replace ``entry`` by ``staging``: rename the old entry aside, rename the new one in,
        then delete the old. Should the process die between the two renames, ``_recover``
        puts the old entry back on the next access."""
        if not entry.exists():
            os.rename(staging, entry)
            return
        replaced = self.root / f".replaced-{entry.name}-{tag}"
        os.rename(entry, replaced)
        try:
            os.rename(staging, entry)
        except BaseException:
            os.rename(replaced, entry)
            raise
        shutil.rmtree(replaced, ignore_errors=True)

    def _recover(self, name: str) -> None:
        """Restore an entry left renamed aside by an interrupted replace (see ``_swap_in``)."""
        if self._entry(name).exists() or not self.root.is_dir():
            return
        aside = sorted(self.root.glob(f".replaced-{name}-*"), key=lambda p: p.stat().st_mtime)
        if aside:
            os.rename(aside[-1], self._entry(name))

    def _read_card(self, entry: Path) -> ModelCard:
        path = entry / CARD_FILE
        if not path.is_file():
            raise ZooError(f"model card {str(path)!r} is missing")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ZooError(f"model card {str(path)!r} is not valid JSON: {exc}") from None
        card = ModelCard.from_dict(data, source=f"model card {str(path)!r}")
        if card.name != entry.name:
            raise ZooError(f"model card {str(path)!r} is named {card.name!r} but lies in folder {entry.name!r}; "
                           f"names must match (two entries would clash)")
        return card

    @_ZooMethod
    def get(self, name: str) -> ModelCard:
        """The card of model ``name`` (validated)."""
        entry = self._entry(name)
        self._recover(name)
        if not entry.is_dir():
            known = [c.name for c in self.list()]
            raise ZooError(f"no model named {name!r} in the zoo at {str(self.root)!r}; available: "
                           f"{', '.join(known) or 'none'}")
        return self._read_card(entry)

    @_ZooMethod
    def list(self) -> list[ModelCard]:
        """Every valid card, sorted by name (an invalid entry raises ZooError naming its file)."""
        if not self.root.is_dir():
            return []
        # Hidden folders (a replace in progress) are not entries.
        return [self._read_card(p) for p in sorted(self.root.iterdir())
                if p.is_dir() and _NAME.fullmatch(p.name) and (p / CARD_FILE).exists()]

    @_ZooMethod
    def checkpoint_path(self, name: str, *, verify: bool = True) -> Path:
        """The stored checkpoint of ``name``; ``verify`` checks it exists and matches the checksum."""
        card = self.get(name)
        path = self._entry(name) / CHECKPOINT_FILE
        if verify:
            if not path.is_file():
                raise ZooError(f"model {name!r}: checkpoint {str(path)!r} is missing")
            if card.checksum and _sha256(path) != card.checksum:
                raise ZooError(f"model {name!r}: checkpoint {str(path)!r} does not match the checksum in its card "
                               f"(the file was altered or corrupted); re-register the model")
        return path

    @_ZooMethod
    def load(self, name: str, env: Any = None) -> Any:
        """A ``rlox.Trainer`` for model ``name`` (checksum verified, read with ``weights_only``)."""
        from rlox.trainer import Trainer

        card = self.get(name)
        path = self.checkpoint_path(name)
        trainer = Trainer.from_checkpoint(path, algorithm=card.algorithm, env=env if env is not None else card.env)
        trainer.card = card
        return trainer

    @_ZooMethod
    def remove(self, name: str) -> None:
        """Delete model ``name`` from the zoo (also an entry whose card is corrupt)."""
        entry = self._entry(name)
        self._recover(name)
        if not entry.is_dir():
            self.get(name)          # raises ZooError listing the models there are
        shutil.rmtree(entry)

    def __repr__(self) -> str:
        return f"ModelZoo({str(self.root)!r})"
