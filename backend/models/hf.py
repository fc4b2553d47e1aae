"""Hugging Face LLaMA checkpoints (``config.json`` + safetensors, sharded or not) in and out
of our ``Transformer``, and a per-box initializer for distributed training.

Callers may rely on:

- ``load_pretrained(dir)``: a ``Transformer`` (fp32 by default) whose summed token loss,
  divided by the token count, equals ``transformers``' mean loss on the same tokens.
- ``save_pretrained(model, dir)``: a checkpoint ``transformers`` loads, which
  ``load_pretrained`` reads back to equal tensors.
- ``hf_initializer(dir)``: ``(name, full_shape, box) -> Tensor``, the ``initial`` of
  ``Engine``/``Master``; each call reads only ``box`` of one tensor from its shard file.

Rotary convention: our ``apply_rotary`` is the rotate-half form, the form Hugging Face
stores q/k projections for (its conversion script permutes Meta's interleaved weights
into it), so rows load as they are: no permutation, and any box of rows (tensor-parallel
or not) is read directly.

Tied embeddings (``tie_word_embeddings``): ``load_pretrained`` ties them truly (the head
*is* the embedding Parameter), so evaluation and single-device torch training match
``transformers``. The engine cannot train them tied (it lays the embedding and the head
out as two parameters on different pipeline stages; ``ModelConfig.param_shapes`` refuses
a tied config): to train such a checkpoint, use ``config.with_(tie_embeddings=False)``,
and ``hf_initializer`` starts both from the stored embedding, which training then unties.

Nothing here imports ``transformers``; reading and writing needs ``safetensors``
(``pip install 'hotswitch[hf]'``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch

from hotswitch.backend.dist_state import Box
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf_config import IGNORED_SUFFIXES, config_from_hf, config_to_dict, hf_name
from hotswitch.backend.models.llama import Transformer, rotary_tables

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"

__all__ = ["HFCheckpoint", "config_from_hf", "hf_initializer", "load_pretrained", "save_pretrained"]


def _safetensors():
    try:
        import safetensors
        import safetensors.torch
    except ImportError:
        raise ImportError(
            "reading or writing Hugging Face checkpoints needs safetensors: pip install 'hotswitch[hf]'"
        ) from None
    return safetensors


def _weight_map(directory: Path) -> dict[str, Path]:
    """Hugging Face tensor name -> the safetensors file holding it."""
    if (directory / INDEX).is_file():
        index = json.loads((directory / INDEX).read_text())
        return {name: directory / file for name, file in index["weight_map"].items()}
    if (directory / SINGLE).is_file():
        with _safetensors().safe_open(directory / SINGLE, framework="pt") as f:
            return dict.fromkeys(f.keys(), directory / SINGLE)
    raise FileNotFoundError(
        f"{directory}: neither {SINGLE} nor {INDEX}; only safetensors checkpoints load "
        "(convert a pytorch_model.bin with transformers' save_pretrained(..., safe_serialization=True))"
    )


class HFCheckpoint:
    """A Hugging Face LLaMA checkpoint folder, read by our parameter names, one box at a time.

    ``config`` is its ``ModelConfig``; ``read(name, box)`` opens the one shard file holding
    ``name`` and reads only ``box`` (all of it when ``box`` is None) as float32."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.config = config_from_hf(self.directory)
        self.files = _weight_map(self.directory)
        self._check_names()

    def _check_names(self) -> None:
        wanted = {hf_name(n) for n in self.config.with_(tie_embeddings=False).param_shapes()}
        if self.config.tie_embeddings:
            wanted.discard("lm_head.weight")  # tied checkpoints may store it or not
        stored = {n for n in self.files if not n.endswith(IGNORED_SUFFIXES)}
        missing, unexpected = sorted(wanted - stored), sorted(stored - wanted - {"lm_head.weight"})
        if missing or unexpected:
            raise ValueError(
                f"{self.directory}: the tensors do not match config.json's LLaMA model: missing {missing[:5]}"
                f"{' ...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
                f"{' ...' if len(unexpected) > 5 else ''} (biases or another architecture are not supported)"
            )
        if "lm_head.weight" not in stored and not self.config.tie_embeddings:
            raise ValueError(
                f"{self.directory}: no lm_head.weight and tie_word_embeddings is false; the output head is missing"
            )

    def _stored_name(self, name: str) -> str:
        stored = hf_name(name)
        if stored == "lm_head.weight" and stored not in self.files:
            return hf_name("tok_embeddings.weight")  # tied: the head is the embedding
        return stored

    def shape(self, name: str) -> tuple[int, ...]:
        stored = self._stored_name(name)
        with _safetensors().safe_open(self.files[stored], framework="pt") as f:
            return tuple(f.get_slice(stored).get_shape())

    def read(self, name: str, box: Box | None = None) -> torch.Tensor:
        """Our parameter ``name`` (or its ``box``) as float32, read from its shard file only."""
        stored = self._stored_name(name)
        with _safetensors().safe_open(self.files[stored], framework="pt") as f:
            tensor = f.get_tensor(stored) if box is None else f.get_slice(stored)[box.slices()]
        return tensor.to(torch.float32)


def hf_initializer(
    checkpoint: str | Path | HFCheckpoint,
) -> Callable[[str, tuple[int, ...], Box], torch.Tensor]:
    """``initial(name, full_shape, box)`` for ``Engine(..., initial=...)``: ``box`` of parameter
    ``name`` read from the checkpoint (nothing else of it), after checking that ``full_shape``
    is the stored tensor's shape (the engine's config must be the checkpoint's)."""
    source = checkpoint if isinstance(checkpoint, HFCheckpoint) else HFCheckpoint(checkpoint)

    def initial(name: str, full_shape: tuple[int, ...], box: Box) -> torch.Tensor:
        stored = source.shape(name)
        if tuple(full_shape) != stored:
            raise ValueError(
                f"{source.directory}: {name} is {stored} in the checkpoint but {tuple(full_shape)} in the "
                "engine's model; build the engine with models.hf.config_from_hf(dir)"
            )
        return source.read(name, box)

    return initial


def load_pretrained(
    directory: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> Transformer:
    """The checkpoint in ``directory`` as our ``Transformer`` on ``device`` in ``dtype`` (see the
    module docstring on tied embeddings); errors name what does not match a LLaMA checkpoint."""
    source = HFCheckpoint(directory)
    config = source.config
    with torch.device("meta"):
        model = Transformer(config)
    model = model.to_empty(device=device).to(dtype)
    if config.tie_embeddings:  # to_empty/to may have replaced the shared Parameter
        model.output.weight = model.tok_embeddings.weight
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(source.read(name))
        cos, sin = rotary_tables(config, device)
        model.get_buffer("rope_cos").copy_(cos)
        model.get_buffer("rope_sin").copy_(sin)
    return model


def _shards(tensors: dict[str, torch.Tensor], max_shard_bytes: int | None) -> list[dict[str, torch.Tensor]]:
    """Tensors in order, cut into shards of at most ``max_shard_bytes`` (one tensor may exceed it)."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if max_shard_bytes is not None and shards[-1] and size + nbytes > max_shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    return shards


def save_pretrained(model: Transformer, directory: str | Path, max_shard_bytes: int | None = None) -> None:
    """Write ``model`` as a Hugging Face LLaMA checkpoint into ``directory`` (created):
    ``config.json`` and one ``model.safetensors``, or shards of at most ``max_shard_bytes``
    with ``model.safetensors.index.json``. Tensors keep the model's dtype; a tied head is
    stored once, as the embedding."""
    safetensors = _safetensors()
    config: ModelConfig = model.config
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {hf_name(n): p.detach().to("cpu").contiguous() for n, p in model.named_parameters()}
    dtype = next(iter(tensors.values())).dtype
    meta = {**config_to_dict(config), "torch_dtype": str(dtype).removeprefix("torch.")}
    (out / "config.json").write_text(json.dumps(meta, indent=2) + "\n")
    shards = _shards(tensors, max_shard_bytes)
    if len(shards) == 1:
        safetensors.torch.save_file(shards[0], out / SINGLE, metadata={"format": "pt"})
        return
    weight_map = {}
    for i, shard in enumerate(shards, 1):
        file = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        safetensors.torch.save_file(shard, out / file, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, file))
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / INDEX).write_text(json.dumps(index, indent=2) + "\n")
