"""rlox's built-in algorithms, read from the package's own ``rlox.algorithms`` entry points.

The entry points in ``pyproject.toml`` are the one list of algorithms: ``rlox.plugins`` registers
them, and the lazily imported public names are derived from them here:

    ppo = "rlox.algorithms.ppo:PPO"   ->   rlox.algorithms.PPO, rlox.PPO,
                                           rlox.trainer.PPOTrainer, rlox.PPOTrainer
    grpo = "rlox.algorithms.grpo:GRPO [llm]"   ->   rlox.algorithms.GRPO, rlox.GRPO (no Trainer:
                                           the ``llm`` extra marks a language-model algorithm,
                                           which trains a model, not on an env)

So a new algorithm is its file, its config dataclass and one entry-point line. The metadata is
read on the first lookup of a derived name, never by ``import rlox`` (``importlib.metadata``
costs about as much to import as rlox's own modules).
"""
from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

__all__ = ["BuiltinAlgorithm", "builtin_algorithms", "lazy_module", "ALGORITHM_GROUP"]

ALGORITHM_GROUP = "rlox.algorithms"


class BuiltinAlgorithm(NamedTuple):
    """One ``rlox.algorithms`` entry point of the rlox package."""

    name: str            #: registry name ("ppo")
    module: str          #: module defining the class ("rlox.algorithms.ppo")
    cls: str             #: class name ("PPO")
    trainer: str | None  #: named Trainer ("PPOTrainer"); None for language-model algorithms


@functools.lru_cache(maxsize=None)
def builtin_algorithms() -> tuple[BuiltinAlgorithm, ...]:
    """The rlox package's own algorithm entry points, in ``pyproject.toml`` order.

    Raises:
        ImportError: rlox's package metadata is missing (rlox imported from a source tree that
            was never installed); the message says how to install it.
    """
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        eps = distribution("rlox").entry_points
    except PackageNotFoundError:
        raise ImportError("rlox's package metadata (its entry points, which list the algorithms) is not "
                          "installed; install rlox, e.g. `pip install -e .` in the repository") from None
    out = []
    for ep in eps:
        if ep.group != ALGORITHM_GROUP:
            continue
        module, _, attr = ep.value.partition(":")
        attr = attr.split("[")[0].strip()
        llm = "llm" in (ep.extras or [])
        out.append(BuiltinAlgorithm(ep.name, module.strip(), attr, None if llm else f"{attr}Trainer"))
    return tuple(out)


def lazy_module(module: str, static: dict[str, str], derived: Callable[[], dict[str, str]],
                eager_all: Sequence[str] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` (PEP 562) for a package whose public names import on
    first use: ``static`` and ``derived()`` map each name to the module defining it; ``derived``
    (which reads the metadata) runs only for names that are not in ``static``. ``__all__`` is
    ``eager_all`` plus every lazy name."""

    def names() -> dict[str, str]:
        return {**static, **derived()}

    def __getattr__(name: str) -> Any:
        if name == "__all__":
            value: Any = [*eager_all, *names()]
        else:
            where = static.get(name) or (None if name.startswith("_") else names().get(name))
            if where is None:
                raise AttributeError(f"module {module!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(where), name)
        setattr(sys.modules[module], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module])) | set(names()))

    return __getattr__, __dir__
