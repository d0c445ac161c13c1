# ExperienceTable: append-only float32 columns of transitions for on-policy data, with the
# argument checks of rlox/_ext/buffers.pxd.
from libc.string cimport memcpy
from _types cimport float32_t, intp_t
from _checks cimport is_native_vec, positive_int
from rlox._ext.buffers cimport _flags, _real_arr, _reward
import numpy as np
cimport numpy as cnp

cnp.import_array()


cdef class ExperienceTable:
    """Append-only columnar table of transitions for on-policy data.

    ``ExperienceTable(obs_dim, act_dim=1)``; ``push(obs, action, reward, terminated,
    truncated=False)`` appends a row, ``push_batch(obs, actions, rewards, terminated,
    truncated=None)`` appends N rows; ``observations()`` ``[N, obs_dim]``, ``actions()``
    ``[N, act_dim]``, ``rewards()``, ``terminated()``, ``truncated()`` ``[N]`` (all float32)
    return read-only views of the rows so far, which later pushes never change (storage grows
    by doubling into new arrays, and ``clear()`` starts new ones). ``columns()`` gives all five.
    """
    cdef readonly intp_t obs_dim
    cdef readonly intp_t act_dim
    cdef intp_t _n
    cdef intp_t _cap
    cdef object _obs, _act, _rew, _term, _trunc
    cdef float32_t* _po
    cdef float32_t* _pa
    cdef float32_t* _pr
    cdef float32_t* _pt
    cdef float32_t* _pu

    def __init__(self, obs_dim, act_dim=1):
        self.obs_dim = positive_int(obs_dim, "obs_dim")
        self.act_dim = positive_int(act_dim, "act_dim")
        self._n = 0
        self._alloc(1024)

    cdef _alloc(self, intp_t cap):
        cdef intp_t n = self._n
        obs = np.empty((cap, self.obs_dim), dtype=np.float32)
        act = np.empty((cap, self.act_dim), dtype=np.float32)
        rew = np.empty(cap, dtype=np.float32)
        term = np.empty(cap, dtype=np.float32)
        trunc = np.empty(cap, dtype=np.float32)
        if n:
            obs[:n] = self._obs[:n]
            act[:n] = self._act[:n]
            rew[:n] = self._rew[:n]
            term[:n] = self._term[:n]
            trunc[:n] = self._trunc[:n]
        self._obs, self._act, self._rew, self._term, self._trunc = obs, act, rew, term, trunc
        self._po = <float32_t*>cnp.PyArray_DATA(obs)
        self._pa = <float32_t*>cnp.PyArray_DATA(act)
        self._pr = <float32_t*>cnp.PyArray_DATA(rew)
        self._pt = <float32_t*>cnp.PyArray_DATA(term)
        self._pu = <float32_t*>cnp.PyArray_DATA(trunc)
        self._cap = cap

    cdef int _reserve(self, intp_t extra) except -1:
        cdef intp_t cap = self._cap
        if self._n + extra <= cap:
            return 0
        while cap < self._n + extra:
            cap *= 2
        self._alloc(cap)
        return 0

    def __len__(self):
        return self._n

    def push(self, obs, action, reward, terminated, truncated=False):
        """Append one row: obs ``(obs_dim,)``, action ``(act_dim,)`` or a number."""
        o = obs if is_native_vec(obs, cnp.NPY_FLOAT, self.obs_dim) else _row(obs, "obs", self.obs_dim)
        cdef float32_t a1
        cdef const float32_t* ap
        if self.act_dim == 1 and (type(action) is float or type(action) is int):
            a1 = <float32_t>(<double>action)
            ap = &a1
        else:
            a = (action if is_native_vec(action, cnp.NPY_FLOAT, self.act_dim)
                 else _row(action, "action", self.act_dim))
            ap = <const float32_t*>cnp.PyArray_DATA(a)
        cdef double r = _reward(reward)
        self._reserve(1)
        cdef intp_t n = self._n, k
        memcpy(self._po + n * self.obs_dim, cnp.PyArray_DATA(o), self.obs_dim * sizeof(float32_t))
        for k in range(self.act_dim):
            self._pa[n * self.act_dim + k] = ap[k]
        self._pr[n] = <float32_t>r
        self._pt[n] = 1.0 if terminated else 0.0
        self._pu[n] = 1.0 if truncated else 0.0
        self._n = n + 1

    def push_batch(self, obs, actions, rewards, terminated, truncated=None):
        """Append N rows: obs ``[N, obs_dim]`` (or flat), actions ``[N, act_dim]``, rest ``[N]``."""
        rew = np.ascontiguousarray(_real_arr(rewards, "rewards").reshape(-1), dtype=np.float32)
        cdef intp_t n = rew.shape[0]
        if n and not np.isfinite(rew).all():
            raise ValueError("rewards must be finite")
        o = _real_arr(obs, "obs")
        if o.size != n * self.obs_dim or not (o.ndim == 1 or o.shape == (n, self.obs_dim)):
            raise ValueError(f"obs has shape {o.shape}, expected ({n}, {self.obs_dim})")
        a = _real_arr(actions, "actions")
        if a.size != n * self.act_dim or not (a.ndim == 1 or a.shape == (n, self.act_dim)):
            raise ValueError(f"actions has shape {a.shape}, expected ({n}, {self.act_dim})")
        te = _flags(terminated, "terminated", n)
        tr = np.zeros(n, dtype=np.float32) if truncated is None else _flags(truncated, "truncated", n)
        self._reserve(n)
        cdef intp_t s = self._n
        self._obs[s:s + n] = o.reshape(n, self.obs_dim)
        self._act[s:s + n] = a.reshape(n, self.act_dim)
        self._rew[s:s + n] = rew
        self._term[s:s + n] = te
        self._trunc[s:s + n] = tr
        self._n = s + n

    cdef object _view(self, object arr):
        v = arr[:self._n]
        v.flags.writeable = False
        return v

    def observations(self):
        return self._view(self._obs)

    def actions(self):
        return self._view(self._act)

    def rewards(self):
        return self._view(self._rew)

    def terminated(self):
        return self._view(self._term)

    def truncated(self):
        return self._view(self._trunc)

    def columns(self):
        """All columns as a dict of read-only arrays."""
        return {"obs": self.observations(), "actions": self.actions(), "rewards": self.rewards(),
                "terminated": self.terminated(), "truncated": self.truncated()}

    def clear(self):
        """Drop every row (views handed out before keep their data)."""
        self._n = 0
        self._alloc(self._cap)

    def __repr__(self):
        return f"ExperienceTable(obs_dim={self.obs_dim}, act_dim={self.act_dim}, len={self._n})"


cdef object _row(object x, str name, intp_t size):
    arr = _real_arr(x, name)
    if arr.size != size or arr.ndim > 1:
        raise ValueError(f"{name} has shape {arr.shape}, expected ({size},)")
    return np.ascontiguousarray(arr.reshape(-1), dtype=np.float32)
