"""Hugging Face checkpoints of every family that loads (``config.json`` + safetensors,
sharded or not) in and out of our ``Transformer``, and a per-box initializer for distributed
training.

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

Tied embeddings (``tie_word_embeddings``): one parameter, ``tok_embeddings.weight``, which
the head reads; the export stores it once, as the embedding, as transformers expects. Fused
tensors (Phi-3's ``qkv_proj``, ``gate_up_proj``) are read as their parts' rows and written
fused again (``hf_names``); the export's ``config.json`` is of the checkpoint's own
``model_type``, so a fine-tuned model loads in transformers as itself.

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
from hotswitch.backend.models.hf_config import SETTINGS, config_from_hf
from hotswitch.backend.models.hf_config_out import config_to_dict
from hotswitch.backend.models.hf_names import IGNORED_SUFFIXES, hf_name, stored_layout, stored_parts
from hotswitch.backend.models.llama import Transformer
from hotswitch.backend.models.rotary import rotary_buffers

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
    """A Hugging Face checkpoint folder of any family that loads, read by our parameter names,
    one box at a time.

    ``config`` is its ``ModelConfig``; ``read(name, box)`` opens the one shard file holding
    ``name`` and reads only ``box`` (all of it when ``box`` is None) as float32, from the rows
    of a fused tensor where the family fuses it. A missing, extra or misshapen tensor is refused
    at once, naming it."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.config = config_from_hf(self.directory)
        self.raw = json.loads((self.directory / "config.json").read_text())
        self.files = _weight_map(self.directory)
        self.layout = stored_layout(self.config)
        self._check_names()
        self._check_shapes()

    def _check_names(self) -> None:
        wanted = {tensor for stored in self.layout.values() for tensor in stored.names()}
        stored = {n for n in self.files if not n.endswith(IGNORED_SUFFIXES) and not self._prediction_layer(n)}
        head = hf_name("output.weight")
        if self.config.tie_embeddings:
            stored.discard(head)  # a tied checkpoint may store the head (as the embedding) or not
        missing = sorted(wanted - stored)
        unexpected = sorted(stored - wanted)
        if missing or unexpected:
            raise ValueError(
                f"{self.directory}: the tensors do not match config.json's {self.config.family} model: "
                f"missing {missing[:5]}{' ...' if len(missing) > 5 else ''}, "
                f"unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}"
            )

    def _prediction_layer(self, tensor: str) -> bool:
        """Whether ``tensor`` belongs to a multi-token-prediction layer stored after the decoder's
        (GLM-4.5's ``num_nextn_predict_layers``): transformers neither loads nor trains them."""
        extra = self.raw.get("num_nextn_predict_layers", self.raw.get("num_mtp_layers", 0)) or 0
        parts = tensor.split(".")
        if not extra or parts[:2] != ["model", "layers"] or not parts[2].isdigit():
            return False
        return self.config.n_layers <= int(parts[2]) < self.config.n_layers + extra

    def _check_shapes(self) -> None:
        expected = self.config.param_shapes()
        for name, want in expected.items():
            have = self.shape(name)
            if have != want:
                raise ValueError(
                    f"{self.directory}: {self.layout[name].name} gives {name} the shape {have}, but config.json "
                    f"implies {want}; the checkpoint and its config.json disagree"
                )

    def shape(self, name: str) -> tuple[int, ...]:
        """Our parameter ``name``'s shape as stored (its rows of a fused tensor)."""
        stored = self.layout[name]
        first = stored.names()[0]
        with _safetensors().safe_open(self.files[first], framework="pt") as f:
            shape = tuple(f.get_slice(first).get_shape())
        if stored.experts:
            for tensor in stored.names()[1:]:
                with _safetensors().safe_open(self.files[tensor], framework="pt") as f:
                    other = tuple(f.get_slice(tensor).get_shape())
                if other != shape:
                    raise ValueError(
                        f"{self.directory}: {tensor} is {other}, but {first} is {shape}; a layer's experts are alike"
                    )
            return (stored.experts, *shape)
        return shape if stored.rows is None else (min(stored.rows, shape[0] - stored.start), *shape[1:])

    def read(self, name: str, box: Box | None = None) -> torch.Tensor:
        """Our parameter ``name`` (or its ``box``) as float32, read from its shard file only (a
        stack of experts: from each expert's tensor in the box)."""
        stored = self.layout[name]
        if stored.experts:
            return self._read_experts(name, box)
        with _safetensors().safe_open(self.files[stored.name], framework="pt") as f:
            if box is None and stored.rows is None:
                tensor = f.get_tensor(stored.name)
            else:
                whole = Box((0,) * len(self.shape(name)), self.shape(name))
                index = (box or whole).slices()
                rows = slice(index[0].start + stored.start, index[0].stop + stored.start)
                key = (rows, *index[1:])
                tensor = f.get_slice(stored.name)[key]
        return tensor.to(torch.float32)

    def _read_experts(self, name: str, box: Box | None) -> torch.Tensor:
        shape = self.shape(name)
        index = (box or Box((0,) * len(shape), shape)).slices()
        tensors = self.layout[name].names()[index[0]]
        parts = []
        for tensor in tensors:
            with _safetensors().safe_open(self.files[tensor], framework="pt") as f:
                parts.append(f.get_slice(tensor)[index[1:]].to(torch.float32))
        return torch.stack(parts)


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
    module docstring on tied embeddings); errors name what does not match the checkpoint."""
    source = HFCheckpoint(directory)
    config = source.config
    with torch.device("meta"):
        model = Transformer(config)
    model = model.to_empty(device=device).to(dtype)
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(source.read(name))
        for buffer, table in rotary_buffers(config, device).items():
            model.get_buffer(buffer).copy_(table)
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


def save_pretrained(
    model: Transformer, directory: str | Path, max_shard_bytes: int | None = None, like: str | Path | None = None
) -> None:
    """Write ``model`` as a Hugging Face checkpoint of its family into ``directory`` (created):
    ``config.json`` and one ``model.safetensors``, or shards of at most ``max_shard_bytes``
    with ``model.safetensors.index.json``. Tensors keep the model's dtype; a tied head is
    stored once, as the embedding; fused tensors are fused again. ``like``: the checkpoint the
    model came from, whose ``config.json`` keys that change no computation (token ids,
    cache settings) are kept."""
    safetensors = _safetensors()
    config: ModelConfig = model.config
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    params = {n: p.detach().to("cpu") for n, p in model.named_parameters()}
    tensors = {
        stored: torch.cat([params[n] if expert is None else params[n][expert] for n, expert in parts]).contiguous()
        for stored, parts in stored_parts(config).items()
    }
    dtype = next(iter(tensors.values())).dtype
    kept = {}
    if like is not None and (Path(like) / "config.json").is_file():
        source = json.loads((Path(like) / "config.json").read_text())
        kept = {k: v for k, v in source.items() if k in SETTINGS}
    meta = {**kept, **config_to_dict(config), "torch_dtype": str(dtype).removeprefix("torch.")}
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
