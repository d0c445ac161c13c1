"""Replay storage (Cython kernels: the ring core in ext/buffers.pyx behind its contract
rlox/_ext/buffers.pxd; ext/per.pyx, ext/mmap_buffer.pyx, ext/nstep.pyx,
ext/experience_table.pyx and ext/trees.pyx). See docs/buffers.md.

* ``ReplayBuffer``: ring buffer, uniform sampling, ``push`` / ``push_batch`` / ``save`` / ``load``.
* ``PrioritizedReplayBuffer``: proportional PER on a sum tree and a min tree.
* ``MmapReplayBuffer``: newest transitions in memory, older ones in a memory-mapped file.
* ``ExperienceTable``: append-only columns for on-policy data.
* ``OfflineDatasetBuffer``: static datasets (Minari, D4RL HDF5, ``.npz``) for offline RL.
* ``compute_nstep_targets``: n-step returns, bootstrap indices and discounts for sampled indices.
* ``SumMinTree``: the trees themselves, with batched updates and prefix-sum queries.
"""
from rlox._ext.buffers import ReplayBuffer
from rlox._ext.experience_table import ExperienceTable
from rlox._ext.mmap_buffer import MmapReplayBuffer
from rlox._ext.nstep import compute_nstep_targets
from rlox._ext.per import PrioritizedReplayBuffer
from rlox._ext.trees import SumMinTree
from rlox.offline import OfflineDatasetBuffer

__all__ = [
    "ReplayBuffer",
    "PrioritizedReplayBuffer",
    "MmapReplayBuffer",
    "ExperienceTable",
    "OfflineDatasetBuffer",
    "compute_nstep_targets",
    "SumMinTree",
]
