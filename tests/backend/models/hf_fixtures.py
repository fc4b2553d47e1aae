"""Random Hugging Face LLaMA checkpoints made here with transformers (no model hub), and
transformers' loss on them: the oracle of the hf tests."""

from __future__ import annotations

from pathlib import Path

import torch

VOCAB, SEQ = 128, 24


def make_checkpoint(directory: Path, seed: int = 0, max_shard_size: str | None = None, **options):
    """A random ``LlamaForCausalLM`` (grouped-query: 8 heads over 4 key/value heads) saved into
    ``directory``; every weight random, norms too, so a swapped tensor changes the loss."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = {
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "max_position_embeddings": 64,
        "rope_theta": 5000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        **options,
    }
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**config)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.copy_(1 + 0.2 * torch.randn_like(param))
            else:
                param.normal_(0, 0.1)
    if max_shard_size is None:
        model.save_pretrained(directory)
    else:
        model.save_pretrained(directory, max_shard_size=max_shard_size)
    return model


def tokens(seed: int = 1, batch: int = 3) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, SEQ), generator=torch.Generator().manual_seed(seed))


def transformers_loss(model, ids: torch.Tensor) -> float:
    """transformers' mean token loss of next-token prediction on ``ids``."""
    with torch.no_grad():
        return model(input_ids=ids, labels=ids).loss.item()


def our_loss(model, ids: torch.Tensor) -> float:
    """Our ``Transformer``'s loss on the same prediction: its summed loss over the token count."""
    with torch.no_grad():
        return (model(ids[:, :-1], ids[:, 1:]) / ids[:, 1:].numel()).item()


def load_with_transformers(directory: Path):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(directory).eval()
