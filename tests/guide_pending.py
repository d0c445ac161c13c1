"""Guide samples waiting for their features (moved into test_guide.py as they land).

Not collected by pytest (the file name does not start with test_).
"""
import numpy as np
import pytest


# Samples that wait for later issues (added here as their features land):
#   issue 6: Callbacks, Logging, LoggerCallback, Config-Driven Training, VecNormalize, Dashboard, Model Zoo
#   issue 7: Trainer sac/dqn/td3, Off-Policy, Multi-Environment Collection, Custom Environments, predict for
#            SAC/TD3/DQN, Continuous / Discrete Q-networks, torch.compile, CLI sac line
#   later:   MAPPO, DreamerV3, IMPALA, Offline RL, GRPO/DPO algorithms, visual/language wrappers, deploy
