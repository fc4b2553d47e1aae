"""Global batches of sequence lengths for simulation, each document truncated at the context.

- ``commoncrawl``: measured. RefinedWeb (the CommonCrawl extract the HotSPa authors trained on)
  as the authors' own Megatron-LM runs counted it (``REFINEDWEB_*`` below, cited beside them);
  lengths drawn log-uniformly within each measured bin. The log truncated documents at 16K, so
  its last bin also holds the longer ones: above 8K the counts are continued geometrically, each
  octave ``q`` of the one below, with ``q`` chosen so the 8K-16K bin plus everything above it
  holds the logged count (an assumption; it only matters at a 32K context).
- ``github``: an ASSUMPTION until measured (no published histogram was found): the log-normal
  body with a power-law tail of ``data.lengths.SYNTHETIC["github"]``.
- ``commoncrawl-synthetic`` / ``github-synthetic``: the earlier stand-ins, still selectable.
"""

from __future__ import annotations

import math
import random

from hotswitch.backend.data.sources import SyntheticDocuments

# Document lengths (GPT-2 BPE) counted by the HotSPa authors' Megatron-LM runs (public repository
# ``Sakura-gh/Megatron-LM``, branch ``sync_files``, the ``real_seq_len`` of rank 5 at the end of
# ``benchmark/logs/gpus8/7b/16k_packing_gbs512.log``; read on 2026-11-25): documents per bin
# (upper bound in tokens, inclusive), over 51,200 documents truncated at 16K (the last bin holds
# the truncated ones). The step times of the same runs are the paper experiment's
# (``sim.paper.measured``).
REFINEDWEB_BINS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REFINEDWEB_COUNTS = (11062, 11624, 11691, 9672, 4578, 1664, 610, 299)
REFINEDWEB_SOURCE = (
    "github.com/Sakura-gh/Megatron-LM, branch sync_files, benchmark/logs/gpus8/7b/16k_packing_gbs512.log (real_seq_len)"
)

DATASETS = ("commoncrawl", "github")  # the paper's two, as the grid runs them
SELECTABLE = (*DATASETS, "commoncrawl-synthetic", "github-synthetic")
ORIGIN = {
    "commoncrawl": f"measured: {REFINEDWEB_SOURCE}",
    "github": "assumption: log-normal body, power-law tail (data.lengths), not measured",
    "commoncrawl-synthetic": "assumption: log-normal body, power-law tail (data.lengths)",
    "github-synthetic": "assumption: log-normal body, power-law tail (data.lengths)",
}
PAPER_BATCH = 512  # sequences per global batch, as in the paper
OCTAVES_ABOVE = 4  # how far past the log's 16K the geometric continuation reaches (256K)


def _measured_bins() -> list[tuple[float, float, float]]:
    """(lower, upper, weight) per bin, the last measured bin continued geometrically."""
    bins: list[tuple[float, float, float]] = []
    lower = 1.0
    for upper, count in zip(REFINEDWEB_BINS[:-1], REFINEDWEB_COUNTS[:-1], strict=True):
        bins.append((lower, upper, float(count)))
        lower = upper
    before = REFINEDWEB_COUNTS[-2]
    last = REFINEDWEB_COUNTS[-1]
    q = last / (before + last)  # before * q / (1 - q) = last: the whole geometric tail
    for octave in range(OCTAVES_ABOVE + 1):
        bins.append((lower, lower * 2, before * q ** (octave + 1)))
        lower *= 2
    return bins


def _measured_lengths(size: int, seed: int) -> list[int]:
    bins = _measured_bins()
    rng = random.Random(seed)
    picked = rng.choices(bins, weights=[w for _, _, w in bins], k=size)
    return [max(1, round(math.exp(rng.uniform(math.log(lo), math.log(hi))))) for lo, hi, _ in picked]


def batch_lengths(dataset: str, context: int, size: int = PAPER_BATCH, seed: int = 0) -> list[int]:
    """``size`` document lengths of ``dataset``, each truncated at ``context`` tokens."""
    if dataset not in SELECTABLE:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(SELECTABLE)}")
    if size < 1 or context < 2:
        raise ValueError(f"a batch needs at least one sequence of 2 tokens, got size={size}, context={context}")
    if dataset == "commoncrawl":
        return [min(context, n) for n in _measured_lengths(size, seed)]
    docs = SyntheticDocuments(dataset.removesuffix("-synthetic"), count=size, seed=seed)
    return [min(context, docs.length(i)) for i in range(size)]


def batch_of_tokens(dataset: str, context: int, tokens: int, seed: int = 0) -> list[int]:
    """A global batch fixed in tokens, not documents: lengths of ``dataset`` (each truncated at
    ``context``) until they hold ``tokens``, the last one cut to make the sum exact, as Hydraulis'
    sampler (``LLaMAFixedTokenSampler``) fills a batch."""
    if tokens < 2:
        raise ValueError(f"a batch needs at least 2 tokens, got {tokens}")
    size = PAPER_BATCH
    lengths = batch_lengths(dataset, context, size, seed)
    while sum(lengths) < tokens:
        size *= 2
        lengths = batch_lengths(dataset, context, size, seed)
    out = []
    total = 0
    for n in lengths:
        out.append(min(n, tokens - total))
        total += out[-1]
        if total == tokens:
            break
    return out
