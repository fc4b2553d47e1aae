"""Selective recompute (Megatron's), as a pass over a rank's executable graph.

Inside every transformer block the cheap, memory-heavy values are dropped after their last
reader in forward and computed again in backward from tensors that are kept anyway; every
matmul output stays. Which ones was decided by measuring (``benchmarks/memory.py``):

- the two RMSNorm outputs (the inputs of the column-parallel linears; with sequence
  parallelism the shard the linears keep), recomputed from the norm's input and weight, which
  the norm keeps for its own backward;
- the FFN's ``silu(w1 x)`` and ``silu(w1 x) * w3 x`` (the second linear's input), recomputed
  from the two up-projections' outputs, which silu and the product keep.

Both are elementwise: about 4 bytes read or written per value, no FLOPs to speak of. Left
kept: attention's output (recomputing it from q, k and v, which the fused attention keeps, is
one attention forward more: 8-14% of a CPU step at 512 tokens in bf16, and at 32K tokens an
eighth of a 7B layer's FLOPs) and rotary embedding's outputs (they are the q and k attention
keeps; its inputs are not kept, so recomputing them frees nothing).

A value is dropped as Megatron's ``CheckpointWithoutOutput`` does: its storage is freed once
every reader has run (the tensors autograd saved share it), and a hook on each reader's
output, which fires before that reader's backward, fills it again with the recomputed value,
once. Backward is autograd's own on the same bytes, so gradients are bit for bit those of
the plain graph.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from hotswitch.backend.graph.checkpoint_blocks import block_ranges
from hotswitch.backend.models.llama import rms_norm
from hotswitch.backend.runtime.collectives import Collective

_VIEWS = {"flatten", "unflatten", "view", "reshape", "transpose", "view_as"}
_reporters: list[Callable[[torch.Tensor], None]] = []  # memory counts open (train.memory_measure)


@contextlib.contextmanager
def releasing(report: Callable[[torch.Tensor], None]) -> Iterator[None]:
    """Hand ``report`` every tensor whose storage selective recompute frees in forward, just
    before it is freed, while the block is open."""
    _reporters.append(report)
    try:
        yield
    finally:
        _reporters.remove(report)


class _Pending:
    """Dropped values of one micro-batch, filled again by the first hook that fires."""

    def __init__(self, recompute: torch.fx.GraphModule, inputs: tuple, released: tuple):
        self.recompute = recompute
        self.dropped: tuple[tuple, tuple] | None = (inputs, released)  # None once filled again

    def refill(self, grad: torch.Tensor) -> torch.Tensor:
        if self.dropped is not None:
            inputs, released = self.dropped
            with torch.no_grad():
                values = self.recompute(*inputs)
            for tensor, value in zip(released, values, strict=True):
                storage = tensor.untyped_storage()
                storage.resize_(value.untyped_storage().nbytes())
                storage.copy_(value.untyped_storage())
            self.dropped = None  # the storages live on in what autograd saved
        return grad


class RecomputedValues(nn.Module):
    """Drops ``released`` after their readers ran and registers their recompute on ``hooked``:
    ``(*inputs, *released, *hooked) -> None``."""

    def __init__(self, recompute: torch.fx.GraphModule, inputs: int, released: int):
        super().__init__()
        self.recompute = recompute
        self.inputs = inputs
        self.released = released

    def forward(self, *args) -> None:
        inputs = args[: self.inputs]
        released = args[self.inputs : self.inputs + self.released]
        hooked = [t for t in args[self.inputs + self.released :] if isinstance(t, torch.Tensor) and t.requires_grad]
        if not torch.is_grad_enabled() or not hooked:
            return
        pending = _Pending(self.recompute, inputs, released)
        for tensor in hooked:
            tensor.register_hook(pending.refill)
        for tensor in released:
            for report in _reporters:
                report(tensor)
            tensor.untyped_storage().resize_(0)

    def extra_repr(self) -> str:
        return f"recomputes {self.released} values from {self.inputs} kept ones in backward"


def _groups(nodes: list[torch.fx.Node]) -> list[list[torch.fx.Node]]:
    """The recomputed nodes of one block, one group per value computed together."""
    groups = []
    for node in nodes:
        if node.op != "call_function":
            continue
        if node.target is rms_norm:
            groups.append([node])
        elif node.target is F.silu and len(node.users) == 1:
            (product,) = node.users
            if product.target is operator.mul:
                groups.append([node, product])
    return groups


def _readers(module: torch.fx.GraphModule, values: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """Every node reading ``values``, directly or through views of them (whose readers keep
    the same storage)."""
    found: dict[torch.fx.Node, None] = {}
    todo = list(values)
    while todo:
        for user in todo.pop().users:
            if user in found:
                continue
            found[user] = None
            aliasing = user.op == "call_method" and user.target in _VIEWS
            if user.op == "call_module":
                target = module.get_submodule(str(user.target))
                aliasing = isinstance(target, Collective) and target.kind == "copy"
            if aliasing:
                todo.append(user)
    return list(found)


def recompute_selectively(module: torch.fx.GraphModule, params: set[str]) -> int:
    """Rewrite ``module`` in place so each block drops its norms' and FFN activation's outputs
    in forward and recomputes them in backward; the number of groups of values recomputed.
    ``params``: the attribute names of its parameters."""
    order = {node: i for i, node in enumerate(module.graph.nodes)}
    count = 0
    for nodes in block_ranges(module.graph, params):
        for group in _groups(nodes):
            readers = _readers(module, group)
            if any(r.op == "output" for r in readers):  # sent on to the next stage: kept whole
                continue
            _insert(module, group, readers, order, f"recomputed_{count}")
            count += 1
    module.graph.lint()
    module.recompile()
    return count


def _insert(
    module: torch.fx.GraphModule,
    group: list[torch.fx.Node],
    readers: list[torch.fx.Node],
    order: dict[torch.fx.Node, int],
    name: str,
) -> None:
    inside = set(group)
    inputs = list(dict.fromkeys(s for n in group for s in n.all_input_nodes if s not in inside))
    sub = torch.fx.Graph()
    env = {source: sub.placeholder(f"in_{i}") for i, source in enumerate(inputs)}
    for node in group:
        env[node] = sub.node_copy(node, lambda n: env[n])
    sub.output(tuple(env[n] for n in group))
    module.add_submodule(name, RecomputedValues(torch.fx.GraphModule(module, sub), len(inputs), len(group)))
    hooked = list(dict.fromkeys([*group, *readers]))  # whichever backward reading a dropped value runs first
    last = max(readers, key=order.__getitem__)
    with module.graph.inserting_after(last):
        module.graph.call_module(name, (*inputs, *group, *hooked))
