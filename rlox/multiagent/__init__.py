"""Multi-agent environments: native vectorised MPE scenarios and PettingZoo parallel envs
behind one vector-env interface (see ``rlox.multiagent.envs`` and docs/multiagent.md)."""
from rlox.multiagent.envs import (
    MPE_SCENARIOS,
    NATIVE_MPE,
    MultiAgentVecEnv,
    PettingZooVecEnv,
    make_multiagent_vec_env,
    resolve_mpe_name,
)

__all__ = ["MPE_SCENARIOS", "NATIVE_MPE", "MultiAgentVecEnv", "PettingZooVecEnv", "make_multiagent_vec_env",
           "resolve_mpe_name"]
