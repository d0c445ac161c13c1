"""rlox's GRPO and DPO losses and gradients equal TRL's on the same model, batch and weights
(the comparison code is the benchmark's: benchmarks/bench_llm_algos.py, which runs every loss type)."""
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="TRL is the peer (pip install trl; in the dev and bench extras)")
pytest.importorskip("datasets")

_spec = importlib.util.spec_from_file_location(
    "bench_llm_algos", Path(__file__).resolve().parents[1] / "benchmarks" / "bench_llm_algos.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_grpo_loss_and_grads_equal_trl(loss_type="dapo"):
    loss_diff, grad_diff, trl_loss = bench.grpo_equivalence(loss_type, beta=0.0)
    assert trl_loss != 0.0
    assert loss_diff < 1e-6 and grad_diff < 1e-5, (loss_diff, grad_diff)


@pytest.mark.parametrize("correction", [True, False])
def test_grpo_with_kl_loss_and_grads_equal_trl(correction):
    """With the k3 term, gradients agree when rlox's kl_bias_correction and TRL's
    use_bias_correction_kl (both on by default) agree."""
    loss_diff, grad_diff, _ = bench.grpo_equivalence("grpo", beta=0.04, bias_correction=correction)
    assert loss_diff < 1e-6 and bench._ref_diff < 1e-5
    assert grad_diff < 1e-5 and bench._plain_diff < 1e-5, (grad_diff, bench._plain_diff)


def test_grpo_kl_ratio_correction_is_what_moves_the_gradient():
    """The ~1e-3 gap once seen against TRL: the ratio on the KL term changes the gradient, not the loss."""
    loss_diff, grad_diff, _ = bench.grpo_equivalence("grpo", beta=0.04, bias_correction=False,
                                                     trl_bias_correction=True)
    assert loss_diff < 1e-6 and grad_diff > 1e-4


def test_dpo_loss_and_grads_equal_trl(loss_type="sigmoid"):
    loss_diff, grad_diff, _ = bench.dpo_equivalence(loss_type)
    assert loss_diff < 1e-6 and grad_diff < 1e-5, (loss_diff, grad_diff)
