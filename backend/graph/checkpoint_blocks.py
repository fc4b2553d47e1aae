"""Activation checkpointing per transformer block, as a pass over a rank's executable graph.

Each block's nodes (from the first that reads one of the block's parameters to the last before
the next block's first) move into a sub-graph run under non-reentrant ``torch.utils.checkpoint``:
only the block's inputs are kept for backward, and its inside is recomputed then. Parameters
stay ``get_attr`` nodes of the outer graph and enter a block as inputs, so ``ExecGraph.attach``
keeps pointing them at the strategy's buffers; collectives inside a block are the outer
module's own submodules (shared by reference), so binding process groups reaches them.
Recomputation runs a block's collectives again in backward, in the same order on every rank of
its group.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator

import torch
import torch.fx
from torch import nn
from torch.utils.checkpoint import checkpoint

from hotswitch.backend.graph.extract import extract

_BLOCK_PARAM = re.compile(r"^layers__(\d+)__")
_reporters: list[Callable[[torch.Tensor], None]] = []  # memory counts open (train.memory_measure)


@contextlib.contextmanager
def reporting(report: Callable[[torch.Tensor], None]) -> Iterator[None]:
    """Hand ``report`` every tensor a checkpointed block keeps for backward (its inputs that
    are not parameters) while the block is open."""
    _reporters.append(report)
    try:
        yield
    finally:
        _reporters.remove(report)


class CheckpointedBlock(nn.Module):
    """Runs ``block`` under non-reentrant checkpointing."""

    def __init__(self, block: torch.fx.GraphModule):
        super().__init__()
        self.block = block

    def forward(self, *inputs):
        if torch.is_grad_enabled():
            for tensor in inputs:
                if isinstance(tensor, torch.Tensor) and not isinstance(tensor, nn.Parameter):
                    for report in _reporters:
                        report(tensor)
        return checkpoint(self.block, *inputs, use_reentrant=False)


def _block_of(node: torch.fx.Node) -> int | None:
    """The block whose parameter ``node`` reads, if any."""
    for source in node.all_input_nodes:
        if source.op == "get_attr" and (match := _BLOCK_PARAM.match(str(source.target))):
            return int(match.group(1))
    return None


def block_ranges(graph: torch.fx.Graph, params: set[str]) -> list[list[torch.fx.Node]]:
    """Each block's compute nodes, in order: from the node that first reads one of its
    parameters up to the next block's first (the last block ends at the first node that reads
    a parameter, among the ``params`` attributes, of no block: the final norm or the head; or at
    the output)."""
    nodes = [n for n in graph.nodes if n.op not in ("placeholder", "get_attr", "output")]
    starts: list[tuple[int, int]] = []  # (position, block)
    for position, node in enumerate(nodes):
        block = _block_of(node)
        if block is not None and (not starts or starts[-1][1] != block):
            starts.append((position, block))
    ranges = []
    for i, (start, _) in enumerate(starts):
        if i + 1 < len(starts):
            end = starts[i + 1][0]
        else:
            end = next((p for p in range(start, len(nodes)) if _reads_outside(nodes[p], params)), len(nodes))
        ranges.append(nodes[start:end])
    return ranges


def _reads_outside(node: torch.fx.Node, params: set[str]) -> bool:
    return any(
        s.op == "get_attr" and s.target in params and not _BLOCK_PARAM.match(str(s.target))
        for s in node.all_input_nodes
    )


def checkpoint_blocks(module: torch.fx.GraphModule, params: set[str]) -> int:
    """Rewrite ``module`` in place so every block runs checkpointed; the number of blocks.
    ``params``: the attribute names of its parameters."""
    ranges = block_ranges(module.graph, params)
    for index, nodes in enumerate(ranges):
        extract(module, nodes, f"checkpointed_block_{index}", CheckpointedBlock)
    module.graph.lint()
    module.recompile()
    return len(ranges)
