"""Which fused kernel runs causal attention: chosen by measurement on the device, process-wide.

PyTorch's ``scaled_dot_product_attention`` has several kernels, and which is fastest depends on
the device, the dtype, the head shape and the length: on an H200 in bf16 cuDNN's ran a 1b
model's 32K-token attention in 577 ms where flash took 853 ms, forward and backward (issue 41's
profile). cuDNN's,
though, builds an execution plan for every new shape (78-137 ms each, measured there), and
variable-length micro-batches bring new shapes every step. So a kernel that plans per shape
(``PLANS_PER_SHAPE``) sees lengths rounded up to a short ladder (``rounded``: multiples of 128
up to 1,024, then eight steps an octave), the rows padded on the right and the output cut back:
causal attention never lets a real query see a padded key, so the values are exact, and a long
run meets a few dozen shapes at most, each planned once.

``choose(device, dtype, heads, lengths)`` times each kernel the device offers (forward and
backward, one unmeasured run per shape first, so that plans are built before the clock starts),
on a GPU each both with grouped heads as they are and repeated to the query heads, and puts
the fastest in force (``use``); a kernel that refuses the shapes is left out.
``attention_backends`` is what attention runs under: the chosen kernel first, the others after
it as fallbacks for shapes it refuses. Before any choice: flash, then memory-efficient, then
math (no per-shape plans).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace
from functools import partial

import torch
from torch.nn.attention import SDPBackend

from hotswitch.backend.models.attention.agreement import agrees
from hotswitch.backend.models.attention.names import SDPA_BACKENDS

KERNELS = {name: getattr(SDPBackend, member) for name, member in SDPA_BACKENDS.items()}
# what "auto" weighs per device kind: the CPU has one fused kernel (flash; math is the unfused
# reference, ten times slower at a few hundred tokens), so its choice is made without a race
CANDIDATES = {"cuda": ("cudnn", "flash", "efficient"), "cpu": ("flash",)}
PLANS_PER_SHAPE = {"cudnn"}
# device kinds where, for a model with grouped heads, each kernel is timed twice: taking the
# grouped keys and values as they are (``enable_gqa``) and repeated to the query heads first
# (transformers' way where it passes no ``enable_gqa``); a kernel may be faster one way, and
# memory-efficient's takes no grouped heads. On the CPU flash takes them, and nothing races.
REPEATS_RACE = {"cuda"}
# repeated heads keep their copies for backward (at 32K tokens, 1b: 3 GiB more): a kernel's
# repeated form is chosen over its grouped one only where it is at least this much faster
REPEAT_GAIN = 0.05
DEFAULT = ("flash", "efficient", "math")
# how a packed row's documents are attended, per device kind: one fused call each (exact on every
# device), flash's variable-length kernel (one call a micro-batch; CUDA, bf16 and fp16) or
# FlexAttention's one call with a block mask (its backward runs on GPUs only)
DOCUMENT_CANDIDATES = {"cuda": ("varlen", "per_document", "flex"), "cpu": ("per_document",)}
SHORT_DOCUMENT = 512  # tokens a document in the second of the two rows the ways above are timed on


@dataclass
class AttentionChoice:
    """The kernel in force and what choosing it measured: seconds per candidate (forward and
    backward summed over ``lengths``; None where the kernel refused the shapes)."""

    kernel: str
    seconds: dict[str, float | None] = field(default_factory=dict)
    lengths: list[int] = field(default_factory=list)
    alone: bool = False  # no fallbacks: a shape the kernel refuses raises (while it is timed)
    repeats_heads: bool = False  # grouped keys and values repeated to the query heads before the call
    documents: str = "per_document"  # packed rows: one call per document, "varlen" or "flex" (one call)
    document_seconds: dict[str, float | None] = field(default_factory=dict)

    @property
    def rounds_lengths(self) -> bool:
        return self.kernel in PLANS_PER_SHAPE

    @property
    def label(self) -> str:
        """The kernel, and how it takes grouped heads where it is handed them repeated."""
        return f"{self.kernel} (heads repeated)" if self.repeats_heads else self.kernel


_in_force = AttentionChoice(DEFAULT[0])


def in_force() -> AttentionChoice:
    return _in_force


def use(choice: AttentionChoice | str) -> AttentionChoice:
    """Put ``choice`` (or a kernel by name) in force in this process; the one before it."""
    global _in_force
    if isinstance(choice, str):
        if choice not in KERNELS:
            raise ValueError(f"unknown attention kernel {choice!r}: choose one of {', '.join(KERNELS)}")
        choice = AttentionChoice(choice)
    before, _in_force = _in_force, choice
    return before


def attention_backends() -> list[SDPBackend]:
    """The kernels attention runs under, the one in force first."""
    first = _in_force.kernel
    return [KERNELS[first]] if _in_force.alone else [KERNELS[first], *(KERNELS[k] for k in DEFAULT if k != first)]


def rounded(length: int) -> int:
    """``length`` rounded up to the ladder a per-shape-planning kernel sees."""
    if length <= 1024:
        return -(-length // 128) * 128
    step = 1 << (length - 1).bit_length() - 4  # eight steps in each octave
    return -(-length // step) * step


def choose(
    device: torch.device,
    dtype: torch.dtype,
    heads: tuple[int, int, int],
    lengths: list[int],
    candidates: tuple[str, ...] | None = None,
    packed_row: int | None = None,
) -> AttentionChoice:
    """Time each of ``candidates`` (default: the device kind's) on one row of each of
    ``lengths`` with ``heads`` (query heads, key/value heads, head dim), and put the fastest in
    force; with ``packed_row``, also how a packed row of that many tokens attends its documents
    (``DOCUMENT_CANDIDATES``), on a row of documents of halving lengths and a row of short
    ones (a call per document costs most there), a one-call way only where it agrees with
    per-document calls (``attention.agreement``). The choice, with what each candidate took
    (None: refused, failed or disagreed)."""
    candidates = candidates or CANDIDATES.get(device.type, DEFAULT)
    repeats = (False, True) if heads[0] != heads[1] and device.type in REPEATS_RACE else (False,)
    forms = [AttentionChoice(name, alone=True, repeats_heads=r) for name in candidates for r in repeats]
    seconds = {form.label: _time_kernel(form, device, dtype, heads, lengths) for form in forms}
    fastest = _fastest(_weighed(seconds, forms), f"no attention kernel ran on {device} in {dtype}")
    form = next(form for form in forms if form.label == fastest)
    choice = AttentionChoice(form.kernel, seconds, list(lengths), repeats_heads=form.repeats_heads)
    if packed_row is not None:
        _choose_documents(choice, device, dtype, heads, packed_row)
    use(choice)
    return choice


def _weighed(seconds: dict[str, float | None], forms: list[AttentionChoice]) -> dict[str, float | None]:
    """``seconds`` without each repeated form that is not ``REPEAT_GAIN`` faster than its
    kernel's grouped form (which is the one that runs, where it ran at all)."""
    weighed = dict(seconds)
    for form in forms:
        grouped = seconds.get(form.kernel)
        repeated = seconds[form.label]
        slower = grouped is not None and repeated is not None and repeated > (1 - REPEAT_GAIN) * grouped
        if form.repeats_heads and slower:
            weighed[form.label] = None
    return weighed


def _choose_documents(
    choice: AttentionChoice, device: torch.device, dtype: torch.dtype, heads: tuple[int, int, int], length: int
) -> None:
    """Set on ``choice`` how a packed row of ``length`` tokens attends its documents: the fastest
    of the device kind's ways, a one-call way only where it agrees with per-document calls."""
    modes = DOCUMENT_CANDIDATES.get(device.type, ("per_document",))
    ways = {mode: replace(choice, documents=mode) for mode in modes}
    timed = {mode: _time_documents(way, device, dtype, heads, length) for mode, way in ways.items()}
    for mode, way in ways.items():
        if mode != "per_document" and timed[mode] is not None and not agrees(way, device, dtype, heads):
            timed[mode] = None
    choice.documents = _fastest(timed, f"no way of attending packed documents ran on {device}")
    choice.document_seconds = timed


_CHOSEN: dict[tuple, AttentionChoice] = {}


def chosen(
    device: torch.device, dtype: torch.dtype, heads: tuple[int, int, int], lengths: list[int], packed_row: int | None
) -> AttentionChoice:
    """``choose`` with the device kind's candidates, timed once per process for these shapes and
    put in force again after (a warm pool's next cell, a new engine on the same model)."""
    key = (str(device), dtype, heads, tuple(lengths), packed_row)
    if key not in _CHOSEN:
        _CHOSEN[key] = choose(device, dtype, heads, lengths, packed_row=packed_row)
    use(_CHOSEN[key])
    return _CHOSEN[key]


def halving_documents(length: int) -> list[int]:
    """Documents of halving lengths that fill ``length`` tokens: 1,000 -> [500, 250, 125, 62, 63]."""
    out: list[int] = []
    while length - sum(out) > 64:
        out.append((length - sum(out)) // 2)
    return [*out, length - sum(out)] if length > sum(out) else out


def _fastest(seconds: dict[str, float | None], failure: str) -> str:
    timed = {name: s for name, s in seconds.items() if s is not None}
    if not timed:
        raise RuntimeError(f"{failure}: {', '.join(seconds)} all refused")
    return min(timed, key=timed.__getitem__)


def _time_kernel(
    form: AttentionChoice, device: torch.device, dtype: torch.dtype, heads: tuple[int, int, int], lengths: list[int]
) -> float | None:
    """Seconds of forward and backward over ``lengths`` through the model's own attention with
    ``form`` (a kernel alone, its heads grouped or repeated) in force (so lengths round where
    it plans per shape); None if the kernel refuses them."""
    from hotswitch.backend.models.llama import fused_causal_attention

    total = 0.0
    for length in lengths:
        q, k, v = _inputs(device, dtype, heads, length)
        attend = partial(fused_causal_attention, q, k, v)
        seconds = _timed(form, device, attend)
        if seconds is None:
            return None
        total += seconds
    return total


def _time_documents(
    way: AttentionChoice, device: torch.device, dtype: torch.dtype, heads: tuple[int, int, int], length: int
) -> float | None:
    """Seconds of forward and backward of two packed rows of ``length`` tokens attended as
    ``way`` says: one of documents of halving lengths, one of documents of ``SHORT_DOCUMENT``
    tokens; None if it fails there."""
    from hotswitch.backend.models.documents import row_positions
    from hotswitch.backend.models.llama import causal_attention

    q, k, v = _inputs(device, dtype, heads, length)
    whole, rest = divmod(length, SHORT_DOCUMENT)
    total = 0.0
    for documents in (halving_documents(length), [SHORT_DOCUMENT] * whole + [rest] * (rest > 0)):
        attend = partial(causal_attention, q, k, v, row_positions(documents)[None])
        seconds = _timed(way, device, attend)
        if seconds is None:
            return None
        total += seconds
    return total


def _inputs(device: torch.device, dtype: torch.dtype, heads: tuple[int, int, int], length: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    shapes = [(1, length, h, heads[2]) for h in (heads[0], heads[1], heads[1])]
    return [torch.randn(shape, generator=generator).to(device, dtype).requires_grad_() for shape in shapes]


def _timed(choice: AttentionChoice, device: torch.device, attend) -> float | None:
    """Seconds of ``attend()``'s forward and backward with ``choice`` in force, after one
    unmeasured run (which builds what the kernel needs for the shape); None if it fails."""
    from hotswitch.backend.runtime.devices import synchronize

    before = use(choice)
    try:
        with warnings.catch_warnings():  # SDPA's "kernel not used because" where a kernel refuses
            warnings.simplefilter("ignore", UserWarning)
            for _ in range(2):  # the first run unmeasured
                synchronize(device)
                started = time.perf_counter()
                attend().sum().backward()
                synchronize(device)
        return time.perf_counter() - started
    except (RuntimeError, NotImplementedError):  # "No available kernel", or none for this device
        return None
    finally:
        use(before)
