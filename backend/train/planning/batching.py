"""Sequences into micro-batches: one padded row per sequence, so attention never crosses
sequences, under a token budget and the rows the memory budget allows; and a group's
sequences spread over data-parallel replicas.

``MicroBatching`` is the one rule for cutting a strategy's group into the micro-batches
each replica runs: the engine runs it and the cost model predicts it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.data.tokenizer import PAD
from hotswitch.backend.models.llama import IGNORE
from hotswitch.backend.strategy import Strategy


@dataclass(frozen=True)
class MicroBatch:
    tokens: torch.Tensor  # [rows, length]
    targets: torch.Tensor  # [rows, length], IGNORE on padding

    @property
    def shape(self) -> tuple[int, int]:
        rows, columns = self.tokens.shape  # a 2-D tensor
        return rows, columns


def collate(seqs: list[Sequence]) -> MicroBatch:
    """Rows padded on the right to the longest sequence (causal attention: real tokens
    never see the padding, and padded targets are ignored)."""
    length = max(s.length for s in seqs)
    tokens = torch.full((len(seqs), length), PAD, dtype=torch.long)
    targets = torch.full((len(seqs), length), IGNORE, dtype=torch.long)
    for row, s in enumerate(seqs):
        data = torch.tensor(s.tokens, dtype=torch.long)
        tokens[row, : s.length] = data[:-1]
        targets[row, : s.length] = data[1:]
    return MicroBatch(tokens, targets)


def pack(seqs: list[Sequence], token_budget: int, max_rows: Callable[[int], int] | None = None) -> list[list[Sequence]]:
    """Longest first; a micro-batch grows while rows x longest length stays within the token
    budget and its rows within ``max_rows(longest length)`` (what the memory budget allows;
    a sequence longer than either limit travels alone)."""
    out: list[list[Sequence]] = []
    rows = 0  # the most rows the newest micro-batch may hold: both limits are its first row's
    for s in sorted(seqs, key=lambda s: (-s.length, s.doc)):
        if out and len(out[-1]) < rows:
            out[-1].append(s)
        else:
            out.append([s])
            rows = min(token_budget // s.length, max_rows(s.length) if max_rows else token_budget)
    return out


def balance(seqs: list[Sequence], parts: int, cost: Callable[[int], float]) -> list[list[Sequence]]:
    """Deal sequences to ``parts`` replicas, costliest first, each to the least loaded (the
    lowest index among equals; deterministic: every rank computes the same split)."""
    weight = {n: cost(n) for n in {s.length for s in seqs}}  # a length's cost, computed once
    loads = [(0.0, i) for i in range(parts)]  # a heap of (load, replica)
    out: list[list[Sequence]] = [[] for _ in range(parts)]
    for s in sorted(seqs, key=lambda s: (-weight[s.length], s.doc)):
        load, target = heapq.heappop(loads)
        out[target].append(s)
        heapq.heappush(loads, (load + weight[s.length], target))
    return out


@dataclass(frozen=True)
class MicroBatching:
    """How a strategy's group of sequences is cut on the ranks: dealt to its dp replicas by
    ``weight(strategy, length)`` (``balance``; by length when None), then each replica's share
    packed within ``token_budget`` and ``max_rows(strategy, length)`` rows (``pack``; the token
    budget alone when None). Deterministic: every rank computes the same split."""

    token_budget: int
    weight: Callable[[Strategy, int], float] | None = None
    max_rows: Callable[[Strategy, int], int] | None = None

    def split(self, strategy: Strategy, seqs: list[Sequence]) -> list[list[list[Sequence]]]:
        """Per dp replica, its micro-batches (each a list of sequences, longest first)."""
        weight = partial(self.weight, strategy) if self.weight else float
        rows = partial(self.max_rows, strategy) if self.max_rows else None
        return [pack(part, self.token_budget, rows) for part in balance(seqs, strategy.dp, weight)]
