"""Safe checkpoint files: loads never unpickle code, writes never destroy the previous file.

    from rlox.checkpointing import safe_torch_load, atomic_torch_save
    atomic_torch_save({"weights": model.state_dict()}, "model.pt")
    state = safe_torch_load("model.pt")      # torch.load(weights_only=True), always

``safe_torch_load`` reads with ``weights_only=True``: tensors, dicts, lists, numbers and
strings load; a file holding any other pickled object is refused with ``CheckpointError`` and
its code never runs. ``atomic_torch_save`` / ``atomic_write_bytes`` write to a temporary file in
the same directory, flush it to disk, then rename it over the target, so a crash mid-save leaves
the previous checkpoint intact.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator

import torch

__all__ = ["CheckpointError", "safe_torch_load", "atomic_torch_save", "atomic_write_bytes",
           "atomic_write_text", "atomic_path"]


class CheckpointError(ValueError):
    """A checkpoint file is unsafe, corrupt, or not what the caller expected."""


def safe_torch_load(path: str | os.PathLike, map_location: Any = "cpu") -> Any:
    """``torch.load(path, weights_only=True)`` with clear errors.

    Raises:
        FileNotFoundError: no such file.
        CheckpointError: the file holds pickled objects other than tensors and plain containers
            (refused, nothing executed), or it is not a torch checkpoint (truncated, corrupt).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint {str(p)!r} does not exist")
    try:
        return torch.load(p, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        text = str(exc)
        match = re.search(r"(Unsupported global: GLOBAL [\w.]+|GLOBAL [\w.]+ was not an allowed global)", text)
        if match:
            raise CheckpointError(
                f"refusing to load {str(p)!r}: it holds pickled Python objects ({match.group(1)}), not "
                f"just tensors and plain containers, and loading it could run arbitrary code; only "
                f"load such a file if you trust its source, with torch.load(..., weights_only=False)"
            ) from None
        detail = next((ln.strip() for ln in text.splitlines() if ln.strip().startswith("Unsupported")), "")
        raise CheckpointError(f"checkpoint {str(p)!r} is corrupt or not a torch file"
                              + (f" ({detail})" if detail else "")) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"checkpoint {str(p)!r} is corrupt or not a torch file: {first[:200]}") from None


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise FileNotFoundError(f"cannot write {str(target)!r}: directory {str(parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp_path.unlink()
        raise


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    """``torch.save(obj)`` to ``path`` through a temporary file and an atomic rename."""
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def atomic_write_bytes(data: bytes, path: str | os.PathLike) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(text: str, path: str | os.PathLike) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(text.encode("utf-8"), path)

