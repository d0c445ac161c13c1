"""Plain Python/NumPy oracles for the replay kernels (obviously correct, slow)."""
import numpy as np

FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated")


class RingOracle:
    """A ring buffer as a Python list of transitions, slot by slot."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.slots = [None] * capacity
        self.pos = 0
        self.size = 0

    def push(self, obs, action, reward, terminated, truncated, next_obs):
        self.slots[self.pos] = dict(
            obs=np.asarray(obs, np.float32).reshape(-1), next_obs=np.asarray(next_obs, np.float32).reshape(-1),
            actions=np.asarray(action, np.float32).reshape(-1), rewards=np.float32(reward),
            terminated=np.float32(bool(terminated)), truncated=np.float32(bool(truncated)))
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def field(self, name):
        """One field over the live slots 0 .. size-1, as an array."""
        return np.stack([np.asarray(self.slots[s][name]) for s in range(self.size)])

    def newest_first(self):
        """Live slots from the newest to the oldest."""
        return [(self.pos - 1 - k) % self.capacity for k in range(self.size)]


def per_probabilities(priorities, alpha, eps):
    """P(i) = (p_i + eps)^alpha / sum_k (p_k + eps)^alpha."""
    p = (np.asarray(priorities, np.float64) + eps) ** alpha
    return p / p.sum()


def is_weights(probabilities, indices, beta):
    """(N * P(i))^-beta normalised by the largest weight over the whole buffer."""
    probs = np.asarray(probabilities, np.float64)
    n = probs.shape[0]
    w = (n * probs[np.asarray(indices)]) ** -beta
    return w / ((n * probs.min()) ** -beta)


def tree_find(leaves, mass):
    """The leaf whose prefix interval [prefix(i), prefix(i) + leaf(i)) holds mass."""
    prefix = 0.0
    for i, v in enumerate(leaves):
        if v > 0 and prefix <= mass < prefix + v:
            return i
        prefix += v
    raise ValueError("mass beyond the total")


def nstep(rewards, terminated, truncated, newest, capacity, start, n, gamma, stride=1):
    """n-step return from ``start`` in a ring whose newest slot is ``newest``: walks forward
    ``stride`` slots at a time, summing discounted rewards, and stops at a terminated step
    (discount 0), a truncated step, after n rewards, or at one of the newest ``stride`` slots.
    Returns (return, bootstrap slot, discount)."""
    g, d, s = 0.0, 1.0, start
    for k in range(n):
        g += d * float(rewards[s])
        d *= gamma
        if terminated[s]:
            return g, s, 0.0
        if truncated[s] or k == n - 1:
            return g, s, d
        if (newest - s) % capacity < stride:
            return g, s, d
        s = (s + stride) % capacity
    raise AssertionError("unreachable")


def episode_returns(rewards, terminated, truncated):
    """Sum of rewards of each episode (an unfinished final one included)."""
    out, acc, open_ = [], 0.0, False
    for r, te, tr in zip(rewards, terminated, truncated):
        acc += float(r)
        open_ = True
        if te or tr:
            out.append(acc)
            acc, open_ = 0.0, False
    if open_:
        out.append(acc)
    return np.array(out)
