"""``WandbLogger``: metrics to a Weights & Biases run."""
from __future__ import annotations

from typing import Any, Mapping

from rlox.logging.base import LoggerCallback, run_metadata, scalar_metrics

__all__ = ["WandbLogger"]


class WandbLogger(LoggerCallback):
    """Metrics to a Weights & Biases run (``wandb.init(project=..., name=...)``).

    The run starts when training starts (or on the first metrics) with the algorithm's config,
    env and seed in ``wandb.config``, and finishes when training ends (``finish_on_end``).
    Offline: set ``WANDB_MODE=offline`` or pass ``mode="offline"`` (sync later with
    ``wandb sync``).

    Args:
        project: W&B project name.
        name: run name.
        config: extra values for ``wandb.config``.
        finish_on_end: call ``run.finish()`` when training ends (default True).
        log_interval: env steps between logged rows (default: every iteration).
        **init_kwargs: more ``wandb.init`` arguments (``entity``, ``tags``, ``mode``, ``dir``, ...).

    Raises:
        ImportError: when ``wandb`` is not installed (at construction, with the install command).
    """

    def __init__(self, project: str = "rlox", name: str | None = None, config: Mapping[str, Any] | None = None,
                 *, finish_on_end: bool = True, log_interval: int | None = None, **init_kwargs: Any) -> None:
        super().__init__()
        if log_interval is not None and (isinstance(log_interval, bool) or not isinstance(log_interval, int)
                                         or log_interval < 1):
            raise ValueError(f"WandbLogger log_interval must be None or an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = log_interval
        try:
            import wandb
        except ImportError as exc:
            raise ImportError("WandbLogger needs the wandb package, which is not installed; install it with "
                              "pip install 'rlox[logging]' (or pip install wandb), or use TensorBoardLogger / "
                              "CSVLogger instead") from exc
        self._wandb = wandb
        self.project = project
        self.name = name
        self.config = dict(config or {})
        self.finish_on_end = bool(finish_on_end)
        self.init_kwargs = init_kwargs
        self.run: Any = None

    def _run_config(self) -> dict[str, Any]:
        """``wandb.config``: the run's metadata (``rlox.logging.run_metadata``) under the
        ``config`` given to the logger (the logger's keys win)."""
        meta = run_metadata(self.algo) if self.algo is not None else {}
        meta.pop("started", None)                  # wandb records the start time itself
        return {**meta, **self.config}

    def _start(self) -> None:
        if self.run is None:
            self.run = self._wandb.init(project=self.project, name=self.name, config=self._run_config(),
                                        **self.init_kwargs)

    def on_training_start(self) -> None:
        self._start()

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        self._start()
        if self._due(step, metrics):
            self.run.log(scalar_metrics(metrics), step=int(step))

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.finish_on_end:
            self.close()

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
