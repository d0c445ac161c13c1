"""Plain-loop oracles for the advantage kernels (obviously correct, slow)."""
import math


def gae(rewards, values, dones, last_value, gamma, lam):
    n = len(rewards)
    adv = [0.0] * n
    last = 0.0
    for t in reversed(range(n)):
        next_value = last_value if t == n - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv, [a + v for a, v in zip(adv, values)]


def vtrace(log_rhos, rewards, values, dones, bootstrap_value, gamma, rho_bar, c_bar):
    """V-trace by its definition (Espeholt et al. 2018, eq. 1): an explicit sum per step."""
    n = len(rewards)
    rhos = [math.exp(x) for x in log_rhos]
    values_next = list(values[1:]) + [bootstrap_value]
    disc = [gamma * (1.0 - d) for d in dones]
    vs = []
    for s in range(n):
        total = values[s]
        coef = 1.0          # prod_{i<t} disc_i * c_i, from s
        for t in range(s, n):
            delta = min(rho_bar, rhos[t]) * (rewards[t] + disc[t] * values_next[t] - values[t])
            total += coef * delta
            coef *= disc[t] * min(c_bar, rhos[t])
        vs.append(total)
    vs_next = vs[1:] + [bootstrap_value]
    pg = [min(rho_bar, rhos[t]) * (rewards[t] + disc[t] * vs_next[t] - values[t]) for t in range(n)]
    return vs, pg


def vtrace_batched(log_rhos, rewards, values, dones, bootstrap_values, gamma, rho_bar, c_bar):
    """Batched V-trace oracle: ``vtrace`` on each column of time-major [T, N] arrays."""
    import numpy as np

    log_rhos, rewards, values, dones = (np.asarray(a, dtype=np.float64) for a in
                                        (log_rhos, rewards, values, dones))
    T, N = log_rhos.shape
    vs = np.zeros((T, N))
    pg = np.zeros((T, N))
    for j in range(N):
        col_vs, col_pg = vtrace(log_rhos[:, j], rewards[:, j], values[:, j], dones[:, j],
                                float(bootstrap_values[j]), gamma, rho_bar, c_bar)
        vs[:, j], pg[:, j] = col_vs, col_pg
    return vs, pg
