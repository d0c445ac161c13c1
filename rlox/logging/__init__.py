"""Loggers: where an algorithm's metrics go, once per training iteration.

    from rlox.logging import ConsoleLogger, TensorBoardLogger, WandbLogger, CSVLogger
    trainer = Trainer("ppo", env="CartPole-v1", logger=ConsoleLogger(log_interval=500))
    # step=512 | SPS=1234 | reward=45.20

The algorithm calls ``on_train_step(step, metrics)`` on its logger after each iteration (after
the callbacks, so an evaluation that ran in this iteration is in ``metrics`` too) and
``flush()`` when training ends. ``metrics`` keys are namespaced: ``train/`` (mean_reward,
mean_length, episodes, timesteps, learning_rate), ``loss/`` (policy_loss, value_loss, entropy,
approx_kl, clip_fraction, ...), ``eval/`` (mean_reward, std_reward, ...), ``time/`` (sps,
iteration and per-phase seconds).

``logger=`` takes one logger or a list of them. A ``LoggerCallback`` may also be passed in
``callbacks=[...]``: either way it is fed once per iteration. For another backend, subclass
``LoggerCallback`` and implement ``on_train_step``:

    class MLflowLogger(LoggerCallback):
        def on_train_step(self, step, metrics):
            mlflow.log_metrics({k: v for k, v in metrics.items() if is_scalar(v)}, step=step)

``TensorBoardLogger`` writes event files through TensorBoard's own writer and ``WandbLogger``
through ``wandb``; both come with ``pip install 'rlox[logging]'`` (``WANDB_MODE=offline``
is honoured).
"""
from rlox.logging.base import LoggerCallback, algo_env_label, run_metadata, scalar_metrics
from rlox.logging.console import ConsoleLogger
from rlox.logging.csv import CSVLogger
from rlox.logging.tensorboard import EventFileWriter, TensorBoardLogger
from rlox.logging.wandb import WandbLogger

__all__ = ["LoggerCallback", "ConsoleLogger", "TensorBoardLogger", "WandbLogger", "CSVLogger",
           "scalar_metrics", "run_metadata", "algo_env_label", "EventFileWriter"]
