"""World models: DreamerV3's parts (``rlox.world_models.functions``, ``rlox.world_models.rssm``)
and its sequence replay (``rlox.world_models.replay``). The agent is ``rlox.algorithms.dreamer_v3``."""
from rlox.world_models.functions import (ReturnNormalizer, TwoHot, categorical_kl, kl_balance, lambda_returns,
                                         symexp, symlog, unimix_logits)
from rlox.world_models.replay import SequenceReplay
from rlox.world_models.rssm import RSSM, RSSMState

__all__ = ["symlog", "symexp", "TwoHot", "categorical_kl", "kl_balance", "unimix_logits", "ReturnNormalizer",
           "lambda_returns", "SequenceReplay", "RSSM", "RSSMState"]
