"""The hook contract: ``Callback`` (every hook a no-op that continues) and ``CallbackList``,
which fans each hook out to several callbacks (see the package docstring for the hooks)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping


class Callback:
    """Base class of rlox callbacks (all hooks are no-ops that continue training)."""

    def __init__(self) -> None:
        self.algo: Any = None

    def init_callback(self, algo: Any) -> None:
        """Attach to ``algo``; called by the algorithm before training starts."""
        self.algo = algo

    @property
    def num_timesteps(self) -> int:
        """Env steps taken so far by the attached algorithm (0 before attaching)."""
        return int(getattr(self.algo, "num_timesteps", 0)) if self.algo is not None else 0

    def on_training_start(self) -> bool | None:
        return None

    def on_rollout_start(self) -> bool | None:
        return None

    def on_step(self) -> bool | None:
        return None

    def on_rollout_end(self, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_update(self, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_eval(self, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        return None

    # ---- inside an on-policy update (see the module docstring)
    def on_advantages(self, batch: Any) -> None:
        return None

    def on_minibatch_loss(self, loss: Any, metrics: Mapping[str, Any]) -> Any:
        return None

    def on_epoch_end(self, epoch: int, metrics: Mapping[str, Any]) -> bool | None:
        return None

    def on_update_end(self, metrics: dict[str, Any]) -> None:
        return None

    # Hooks whose base implementation is overridden tell the algorithm which calls it must make.
    def _overrides(self, hook: str) -> bool:
        return getattr(type(self), hook) is not getattr(Callback, hook)


def _is_callback(obj: Any) -> bool:
    return isinstance(obj, Callback)


class CallbackList:
    """The callbacks of one algorithm, called in order; used by the algorithm base classes.

    Each ``on_*`` returns False as soon as one callback returns False (the rest of the list
    still sees the hook, so loggers and timers stay consistent).
    """

    def __init__(self, callbacks: Iterable[Any] | None = None) -> None:
        items = list(callbacks or [])
        for i, cb in enumerate(items):
            if not _is_callback(cb):
                raise TypeError(f"callbacks[{i}] is a {type(cb).__name__}, expected an "
                                f"rlox.callbacks.Callback (subclass it and override the hooks)")
        self.callbacks: list[Callback] = items
        self.needs_step = any(cb._overrides("on_step") for cb in items)

    @property
    def needs_loss_hook(self) -> bool:
        """A callback overrides ``on_minibatch_loss`` (PPO then uses its torch update)."""
        return any(cb._overrides("on_minibatch_loss") for cb in self.callbacks)

    @property
    def needs_epoch_hook(self) -> bool:
        return any(cb._overrides("on_epoch_end") for cb in self.callbacks)

    def __iter__(self):
        return iter(self.callbacks)

    def __len__(self) -> int:
        return len(self.callbacks)

    def __getitem__(self, i: int) -> Callback:
        return self.callbacks[i]

    def append(self, cb: Callback) -> None:
        if not _is_callback(cb):
            raise TypeError(f"expected an rlox.callbacks.Callback, got {type(cb).__name__}")
        self.callbacks.append(cb)
        self.needs_step = self.needs_step or cb._overrides("on_step")

    def init_callback(self, algo: Any) -> None:
        for cb in self.callbacks:
            cb.init_callback(algo)

    def _all(self, hook: str, *args: Any) -> bool:
        keep_going = True
        for cb in self.callbacks:
            if getattr(cb, hook)(*args) is False:
                keep_going = False
        return keep_going

    def on_training_start(self) -> bool:
        return self._all("on_training_start")

    def on_rollout_start(self) -> bool:
        return self._all("on_rollout_start")

    def on_step(self) -> bool:
        return self._all("on_step") if self.needs_step else True

    def on_rollout_end(self, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_rollout_end", metrics)

    def on_update(self, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_update", metrics)

    def on_eval(self, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_eval", metrics)

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        for cb in self.callbacks:
            cb.on_training_end(metrics)

    def on_advantages(self, batch: Any) -> None:
        for cb in self.callbacks:
            shapes = (tuple(batch.advantages.shape), tuple(batch.returns.shape))
            cb.on_advantages(batch)
            for name, before in zip(("advantages", "returns"), shapes):
                value = getattr(batch, name)
                if not hasattr(value, "shape") or tuple(value.shape) != before:
                    raise ValueError(f"{type(cb).__name__}.on_advantages set batch.{name} to "
                                     f"{getattr(value, 'shape', type(value).__name__)}; expected a tensor of "
                                     f"shape {before} (one value per rollout row)")

    def on_minibatch_loss(self, loss: Any, metrics: Mapping[str, Any]) -> Any:
        """The loss after every callback's ``on_minibatch_loss`` (each sees the previous one's)."""
        for cb in self.callbacks:
            out = cb.on_minibatch_loss(loss, metrics)
            if out is None:
                continue
            if not (hasattr(out, "backward") and getattr(out, "ndim", None) == 0):
                raise TypeError(f"{type(cb).__name__}.on_minibatch_loss returned {type(out).__name__}; "
                                f"expected a 0-d torch tensor to use as the loss, or None to keep it")
            loss = out
        return loss

    def on_epoch_end(self, epoch: int, metrics: Mapping[str, Any]) -> bool:
        return self._all("on_epoch_end", epoch, metrics)

    def on_update_end(self, metrics: dict[str, Any]) -> None:
        for cb in self.callbacks:
            cb.on_update_end(metrics)
