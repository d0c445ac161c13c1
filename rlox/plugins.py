"""Registries for algorithms, environments, buffers, reward functions, loggers, callbacks and
vector-env wrappers, fed by entry points.

rlox finds its own built-ins the same way it finds third-party plugins:

* built-in parts are declared as entry points of the ``rlox`` package itself (groups
  ``rlox.algorithms``, ``rlox.envs``, ``rlox.buffers``, ``rlox.rewards``, ``rlox.loggers``,
  ``rlox.callbacks``, ``rlox.wrappers`` in ``pyproject.toml``) and imported lazily, on first
  lookup of that name; a third-party package may declare entries in the same groups;
* third-party packages declare a callable in the group ``rlox.plugins``; ``discover_plugins()``
  calls each one, and it registers whatever it provides. Discovery runs once by itself the
  first time a lookup misses.

    from rlox.plugins import ENV_REGISTRY
    ENV_REGISTRY.register("my-env-v0", lambda: MyEnv())     # a factory -> gymnasium.Env
    ENV_REGISTRY.get("my-env-v0")                           # the factory
    ENV_REGISTRY.list()                                     # sorted names

A plugin that fails to import or to register is reported with an ``RloxWarning`` naming the
package and never breaks rlox.
"""
from __future__ import annotations

import difflib
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from rlox.errors import RloxWarning

__all__ = [
    "Registry", "ALGORITHM_REGISTRY", "ENV_REGISTRY", "BUFFER_REGISTRY", "REWARD_REGISTRY",
    "LOGGER_REGISTRY", "CALLBACK_REGISTRY", "WRAPPER_REGISTRY", "harness_name",
    "discover_plugins", "PluginWarning", "PLUGIN_GROUP",
]

PLUGIN_GROUP = "rlox.plugins"

T = TypeVar("T")


class PluginWarning(RloxWarning):
    """A plugin package could not be loaded or registered (rlox carries on without it)."""


class Registry(Generic[T]):
    """Names -> objects, filled by ``register`` and by the entry points of ``group``.

    Args:
        kind: what is registered, used in messages ("algorithm", "env", ...).
        group: entry-point group whose entries are registered lazily (the object is imported
            on first ``get``); None for none.
        normalize: map a name to its key (e.g. ``str.lower`` for case-insensitive names);
            ``list()`` and messages show names as registered.
    """

    def __init__(self, kind: str, group: str | None = None,
                 normalize: Callable[[str], str] | None = None) -> None:
        self.kind = kind
        self.group = group
        self._normalize = normalize or (lambda s: s)
        self._items: dict[str, T] = {}
        self._lazy: dict[str, EntryPoint] = {}
        self._names: dict[str, str] = {}          # key -> the name as registered
        self._scanned = False
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ registration
    def register(self, name: str, obj: T | None = None, *, override: bool = False):
        """Register ``obj`` under ``name``; also usable as a decorator (``@R.register("x")``).

        Raises:
            ValueError: ``name`` is taken and ``override`` is False (silent overwrites hide bugs).
        """
        if not isinstance(name, str) or not name.strip():
            raise TypeError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if obj is None:
            def decorator(o: T) -> T:
                self.register(name, o, override=override)
                return o
            return decorator
        key = self._normalize(name)
        with self._lock:
            self._scan()
            if not override and (key in self._items or key in self._lazy):
                current = self._items.get(key, self._lazy.get(key))
                if current is obj:
                    return obj
                where = current.value if isinstance(current, EntryPoint) else _describe(current)
                raise ValueError(f"{self.kind} {name!r} is already registered ({where}); pass "
                                 f"override=True to replace it, or choose another name")
            self._lazy.pop(key, None)
            self._items[key] = obj
            self._names[key] = name
        return obj

    def unregister(self, name: str) -> None:
        """Remove ``name``; KeyError when it is not registered."""
        key = self._normalize(name)
        with self._lock:
            self._scan()
            if key not in self._items and key not in self._lazy:
                raise KeyError(f"{self.kind} {name!r} is not registered")
            self._items.pop(key, None)
            self._lazy.pop(key, None)
            self._names.pop(key, None)

    # ------------------------------------------------------------------ lookup
    def get(self, name: str) -> T:
        """The object registered under ``name``.

        On a miss, installed plugins are discovered once and the lookup is retried.

        Raises:
            KeyError: unknown name; the message lists the closest registered names.
        """
        if not isinstance(name, str):
            raise TypeError(f"{self.kind} name must be a string, got {type(name).__name__}")
        key = self._normalize(name)
        with self._lock:
            self._scan()
            if key not in self._items and key not in self._lazy:
                discover_plugins(once=True)
            if key in self._items:
                return self._items[key]
            ep = self._lazy.get(key)
            if ep is None:
                raise KeyError(self._unknown_message(name))
            try:
                obj = ep.load()
            except Exception as exc:
                raise ImportError(f"{self.kind} {name!r} is declared by entry point {ep.value!r} "
                                  f"(group {self.group!r}) but failed to import: {exc}") from exc
            self._items[key] = obj
            del self._lazy[key]
            return obj

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        key = self._normalize(name)
        with self._lock:
            self._scan()
            return key in self._items or key in self._lazy

    def list(self) -> list[str]:
        """All registered names (entry points included, not imported), sorted."""
        with self._lock:
            self._scan()
            return sorted(self._names.get(k, k) for k in set(self._items) | set(self._lazy))

    def __iter__(self) -> Iterator[str]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self.list())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self)} entries)"

    # ------------------------------------------------------------------ internals
    def _scan(self) -> None:
        if self._scanned or self.group is None:
            self._scanned = True
            return
        self._scanned = True
        for ep in entry_points(group=self.group):
            key = self._normalize(ep.name)
            if key not in self._items and key not in self._lazy:
                self._lazy[key] = ep
                self._names[key] = ep.name

    def _unknown_message(self, name: str) -> str:
        names = self.list()
        keys = {self._normalize(n): n for n in names}
        close = [keys[k] for k in difflib.get_close_matches(self._normalize(name), list(keys), n=3, cutoff=0.5)]
        if close:
            hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
        elif names:
            hint = "registered: " + ", ".join(names)
        else:
            hint = "none are registered (is rlox installed, e.g. `pip install -e .`?)"
        return f"unknown {self.kind} {name!r}; {hint}"


def _describe(obj: Any) -> str:
    mod = getattr(obj, "__module__", None)
    qual = getattr(obj, "__qualname__", None) or type(obj).__name__
    return f"{mod}.{qual}" if mod else qual


ALGORITHM_REGISTRY: Registry[type] = Registry("algorithm", "rlox.algorithms", normalize=str.lower)
ENV_REGISTRY: Registry[Any] = Registry("env", "rlox.envs")
BUFFER_REGISTRY: Registry[type] = Registry("buffer", "rlox.buffers")
REWARD_REGISTRY: Registry[Callable[..., Any]] = Registry("reward function", "rlox.rewards")


def harness_name(name: str) -> str:
    """The key of a logger, callback or wrapper name: case, ``_``/``-``/spaces and a trailing
    ``Callback``/``Logger`` do not matter, so ``early_stopping``, ``EarlyStopping`` and
    ``EarlyStoppingCallback`` are one name (the YAML experiments of ``rlox.runner`` use them)."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for suffix in ("callback", "logger"):
        if key.endswith(suffix) and key != suffix:
            key = key[: -len(suffix)]
    return key


# The harness parts an experiment file names (rlox.runner): classes taking their YAML arguments.
LOGGER_REGISTRY: Registry[type] = Registry("logger", "rlox.loggers", normalize=harness_name)
CALLBACK_REGISTRY: Registry[type] = Registry("callback", "rlox.callbacks", normalize=harness_name)
WRAPPER_REGISTRY: Registry[type] = Registry("wrapper", "rlox.wrappers", normalize=harness_name)

_discovered = False
_discover_lock = threading.RLock()


def discover_plugins(*, once: bool = False) -> list[str]:
    """Load every installed ``rlox.plugins`` entry point and call it (it registers its parts).

    Args:
        once: do nothing if discovery already ran (what lookups use).

    Returns:
        the names of the plugins that loaded. A plugin that raises is skipped with a
        ``PluginWarning`` naming its package and the error.
    """
    global _discovered
    with _discover_lock:
        if once and _discovered:
            return []
        _discovered = True
        loaded = []
        for ep in entry_points(group=PLUGIN_GROUP):
            dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value.split(":")[0]
            try:
                hook = ep.load()
                if callable(hook):
                    hook()
            except Exception as exc:  # a broken plugin must never break rlox
                warnings.warn(f"rlox plugin {ep.name!r} from package {dist!r} failed to load and "
                              f"was skipped: {type(exc).__name__}: {exc}", PluginWarning, stacklevel=2)
                continue
            loaded.append(ep.name)
        return loaded
