"""The sides that ``benchmarks/peers.py`` times on the same batches: the engine's one-device
step and Hugging Face transformers' causal LM of the model's family (eager or under
``torch.compile``), and the measurement they share (``benchmarks/families.py`` times them
too).

One step on either side is forward, backward, gradient clipping and AdamW (on CUDA fused: PyTorch's
multi-tensor kernel for transformers, the engine's one compiled kernel where its runs compile) over
one batch of sequences, cut into the same micro-batches (``planning.batching.pack``: longest
first, rows padded to the longest within a token budget), the loss of each scaled by the
batch's token count, so that both sides take the same step on the same tokens.
"""

from __future__ import annotations

import gc
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.attention import kernels
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf import hf_initializer
from hotswitch.backend.models.hf_config_out import config_to_dict
from hotswitch.backend.models.hf_names import hf_name
from hotswitch.backend.models.llama import init_param
from hotswitch.backend.precision import Precision
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.batching import MicroBatching, collate, pack
from hotswitch.backend.train.state.optim import OptimizerConfig

# what a side's step_s holds where it has no figure
OOM, SKIPPED, ERROR = "oom", "skipped", "error"
SEED = 0
# how each side computes, per device kind (the output's ``precision``)
PRECISIONS = {"cuda": "bf16 (engine: fp32 master weights; transformers: fp32 weights, bf16 autocast)", "cpu": "fp32"}
OUT_OF_MEMORY = re.compile(r"out of memory|ALLOC_FAILED", re.IGNORECASE)
# SDPA's operators as a profile names them, each by the kernel family it runs
ATTENTION_OPS = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_fused_attention_overrideable": "fused (overrideable)",
}


@dataclass(frozen=True)
class Measured:
    """One side on one row: ``step_s`` is the mean over the row's batches of each batch's median
    step (or ``OOM``, ``SKIPPED``, ``ERROR``); ``first_step_s`` and ``first_loss`` are the first
    warm-up step's (its excess over a step is compilation and kernel plans); ``peak_bytes`` is
    CUDA's peak allocation over the row (None on CPU); ``attention`` the SDPA kernels a
    profiled step ran; ``note`` says why a figure is missing."""

    step_s: float | str
    first_step_s: float | None = None
    first_loss: float | None = None
    peak_bytes: int | None = None
    attention: str | None = None
    note: str | None = None

    def summary(self) -> str:
        """One line of what was measured (progress: a run cut off still shows its figures)."""
        if not isinstance(self.step_s, float):
            return f"{self.step_s} ({self.note})"
        peak = f", peak {self.peak_bytes / 2**30:.1f} GiB" if self.peak_bytes is not None else ""
        return f"{self.step_s:.4f} s a step, first {self.first_step_s:.1f} s{peak}, attention {self.attention}"


# flash's kernel called directly (the engine's packed rows, ``models.attention.varlen``): SDPA's
# flash operator calls it too, so only calls beyond SDPA's count
FLASH_KERNEL, SDPA_FLASH = "aten::_flash_attention_forward", "aten::_scaled_dot_product_flash_attention"


def attention_kernels(run: Callable[[], object]) -> str:
    """The attention kernel families that ``run()`` calls, read from a profile of it."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        run()
    counts = {event.key: event.count for event in profile.key_averages()}
    kinds = [kind for op, kind in ATTENTION_OPS.items() if op in counts]
    if counts.get(FLASH_KERNEL, 0) > counts.get(SDPA_FLASH, 0):
        kinds.append("flash (variable-length)")
    return "+".join(kinds) or NOTHING_SEEN


NOTHING_SEEN = "no attention operator seen"
# how the engine's packed rows attend their documents (``kernels.DOCUMENT_CANDIDATES``)
DOCUMENT_WAYS = {"varlen": "flash (variable-length)", "flex": "FlexAttention", "per_document": "a call per document"}


def measure(
    step: Callable[[list[Sequence]], float], batches: list[list[Sequence]], warmups: int, timed: int, cuda: bool
) -> Measured:
    """``warmups`` steps (at least one per batch), one profiled step, then ``timed`` passes over
    ``batches``, each step timed between device synchronisations; ``OOM`` if the device ran out."""

    def timed_step(batch: list[Sequence]) -> tuple[float, float]:
        if cuda:
            torch.cuda.synchronize()
        started = time.perf_counter()
        loss = step(batch)
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - started, loss

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    try:
        first_s, first_loss = timed_step(batches[0])
        for i in range(1, max(warmups, len(batches))):
            timed_step(batches[i % len(batches)])
        attention = attention_kernels(lambda: step(batches[0]))
        seconds = [[] for _ in batches]
        for _ in range(timed):
            for i, batch in enumerate(batches):
                seconds[i].append(timed_step(batch)[0])
    except RuntimeError as error:  # cuBLAS and cuDNN report a failed allocation as a plain RuntimeError
        if not isinstance(error, torch.cuda.OutOfMemoryError) and not OUT_OF_MEMORY.search(str(error)):
            raise
        return Measured(OOM, note=f"out of memory: {str(error).splitlines()[0]}")
    step_s = statistics.fmean(statistics.median(s) for s in seconds)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    return Measured(step_s, first_s, first_loss, peak, attention)


def host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of ``tensor`` on the host, pinned where it came from a GPU (copied back fast)."""
    copy = tensor.detach().to("cpu", copy=True)
    return copy.pin_memory() if tensor.is_cuda else copy


def release_memory() -> None:
    """Return what a finished (or failed) side held to the device, so the next starts clean."""
    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


class EngineSide:
    """The engine on one device: ``Engine`` with the single strategy (dp1) as its own
    instantiation strategy, in ``precision`` (bf16: fp32 master weights, bf16 compute);
    ``compiled``: its runs of tensor math torch.compiled (a run configuration's ``compile``).
    Rows of documents are packed, as a run with ``packing`` trains them; rows of one sequence
    each are cut as the transformers peer cuts them. ``checkpoint``: a Hugging Face folder whose
    weights it starts from (else the engine's own initial values)."""

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device,
        precision: Precision,
        compiled: bool = False,
        checkpoint: Path | None = None,
    ):
        self.single = Strategy()
        settings = {"seed": SEED, "device": device.type, "compile": compiled, "packing": True}
        initial = None if checkpoint is None else hf_initializer(checkpoint)
        # the token budget reaches the longest row: attention's kernels ("auto") are timed up to it,
        # and a packed row that long chooses how its documents are attended
        run = engine_run(config.max_seq_len, **settings, **precision.as_settings())
        self.engine = Engine(config, [self.single], self.single, run, initial=initial)
        # the weights every row starts from, kept on the host (the device's peak stays the run's)
        self.initial = host_copy(self.engine.master.master_weights().flat)
        self.packed = False  # whether the row in use is of documents, packed

    def restart(self) -> None:
        """Back to the initial weights, AdamW's state fresh: each row trains from the start."""
        master = self.engine.master
        weights = master.master_weights()
        weights.flat.copy_(self.initial)
        master.load_weights(weights)
        master.forget_updates()
        master.refresh()

    def use_budget(self, token_budget: int, documents: bool = False) -> None:
        self.engine.use_batching(MicroBatching(token_budget, packed=documents))
        self.packed = documents

    def attention(self, seen: str) -> str:
        """What a profile of a step saw, with how packed rows attend their documents and what
        each way took when the engine chose (compiled FlexAttention shows no operator)."""
        if not self.packed:
            return seen
        choice = kernels.in_force()
        timed = ", ".join(
            f"{DOCUMENT_WAYS[way]} {'refused' if s is None else f'{s * 1e3:.1f} ms'}"
            for way, s in choice.document_seconds.items()
        )
        packed = f"packed rows: {DOCUMENT_WAYS[choice.documents]} (timed: {timed or 'nothing'})"
        return packed if seen == NOTHING_SEEN else f"{seen}; {packed}"

    def step(self, batch: list[Sequence]) -> float:
        return self.engine.step({self.single: batch}, [self.single]).loss


def _transformers_model(config: ModelConfig, device: torch.device, same_weights: bool, checkpoint: Path | None):
    """transformers' causal LM of the config's family: the checkpoint's weights where one is
    given, else the engine's initial values (``same_weights``) or transformers' own."""
    try:
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError:
        raise ImportError("the transformers peer needs transformers: pip install 'hotswitch[hf]'") from None
    if checkpoint is not None:
        return AutoModelForCausalLM.from_pretrained(checkpoint, attn_implementation="sdpa").to(device)
    settings = config_to_dict(config)
    with torch.device(device):
        hf_config = AutoConfig.for_model(settings.pop("model_type"), **settings, attn_implementation="sdpa")
        model = AutoModelForCausalLM.from_config(hf_config)
    if same_weights:  # the engine's initial values, so that the first losses agree
        hf_params = dict(model.named_parameters())
        with torch.no_grad():
            for name, shape in config.param_shapes().items():
                hf_params[hf_name(name, config.family)].copy_(init_param(name, shape, SEED))
    return model


class TransformersSide:
    """transformers' causal LM of the config's family (``LlamaForCausalLM`` for LLaMA) with SDPA
    attention and fp32 weights, trained as its single-GPU users do: under bf16 autocast when
    ``mixed``, padded rows with no attention mask (causal attention never lets a real token see
    the right padding), gradient accumulation over micro-batches, the loss divided by the batch's token count
    (``num_items_in_batch``), clipping and AdamW with the engine's settings. ``compiled``:
    the model under ``torch.compile`` (default options). ``same_weights``: the engine's initial
    weights rather than transformers' own; ``checkpoint``: a Hugging Face folder's weights."""

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device,
        mixed: bool,
        compiled: bool,
        same_weights: bool,
        checkpoint: Path | None = None,
    ):
        model = _transformers_model(config, device, same_weights, checkpoint)
        self.device, self.mixed, self.optim = device, mixed, OptimizerConfig()
        self.params = list(model.parameters())
        self.optimizer = self.optim.adamw(self.params)
        self.model = torch.compile(model) if compiled else model
        self.token_budget = config.max_seq_len
        # the weights every row starts from, on the host (the compiled peer: a new model a row)
        self.initial = None if compiled else [host_copy(p) for p in self.params]

    def restart(self) -> None:
        """Back to the initial weights with a fresh AdamW: each row trains from the start."""
        if self.initial is not None:
            with torch.no_grad():
                for param, initial in zip(self.params, self.initial, strict=True):
                    param.copy_(initial)
        self.optimizer = self.optim.adamw(self.params)

    def use_budget(self, token_budget: int, documents: bool = False) -> None:
        self.token_budget = token_budget  # documents too in padded, length-sorted rows, as its users do
        self.optimizer.zero_grad(set_to_none=True)  # what a step cut short (out of memory) left

    def attention(self, seen: str) -> str:
        return seen  # SDPA's operators, each seen in a profile

    def step(self, batch: list[Sequence]) -> float:
        count = torch.tensor(sum(s.length for s in batch), device=self.device)
        loss = torch.zeros((), device=self.device)
        for group in pack(batch, self.token_budget):
            micro = collate(group)
            tokens, targets = micro.tokens.to(self.device), micro.targets.to(self.device)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.mixed):
                # targets are already shifted: shift_labels hands them to the loss as they are
                part = self.model(input_ids=tokens, labels=targets, shift_labels=targets, num_items_in_batch=count).loss
            part.backward()
            loss += part.detach()
        torch.nn.utils.clip_grad_norm_(self.params, self.optim.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.item()
