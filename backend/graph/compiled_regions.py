"""Regional compilation (``compile`` in a run configuration), as a pass over a rank's
executable graph: every run of plain tensor operations -- the norms, projections, rotary
embedding, SwiGLU and residual adds between one attention and the next -- becomes one
``torch.compile``d sub-module, so that their element-wise work fuses into a few kernels (as
torchtitan compiles each transformer block) and a step launches far fewer.

What stays outside, as it is: attention (its own fused kernel, reading document spans on the
host), collectives and pipeline links, the embedding, the loss (its passes over the logits are
compiled kernels of their own, ``chunked_loss``'s ``fused``, which the executable graph picks
where this pass runs), and context parallelism's rotary embedding. Rotary tables are looked up
once a micro-batch, ahead of every run (``documents.gather_tables``), so the runs hold only
tensor math. A checkpointed block's inside is compiled the same way (its runs recompute
compiled). Strategies with selective recompute are left eager: it frees and refills exactly the
element-wise values a compiled run would fuse away, which Inductor's partitioner already
recomputes in backward by itself.

Blocks repeat: the run after block i's attention is the same graph as after block j's, with
other parameters as its inputs. So one compiled module, keyed by the run's structure, serves
every block, every strategy and every engine of this process (a warm pool's next cell too):
torch.compile traces it once per kind of input (dtype, feature sizes) rather than once per layer.
Its activations come in every length (packed rows, length groups, sequence shards), so their
leading dimensions are marked dynamic from the first call: one trace serves every length, where
torch.compile alone would trace the first length, then trace again once a second one comes.
Weights keep their sizes, as do activations' last (feature) dimension, so kernels stay
specialised to the model's widths.
"""

from __future__ import annotations

import itertools
import operator
import sys
from functools import partial
from typing import cast

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn

from hotswitch.backend.graph.checkpoint_blocks import CheckpointedBlock
from hotswitch.backend.graph.extract import extract, item, run_inputs
from hotswitch.backend.models.documents import gather_tables
from hotswitch.backend.models.lean_ops import RotaryFunction
from hotswitch.backend.models.llama import add_bias, apply_rotary, rms_norm, scale

__all__ = ["compile_regions", "compile_seconds", "compiled_runs"]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x`` by tables already at its tokens' positions."""
    return RotaryFunction.apply(x, cos, sin)


# F.linear: torch._C._nn's
FUSIBLE_FUNCTIONS = {operator.add, operator.mul, F.linear, F.silu, F.gelu, rms_norm, rotate, add_bias, scale}
FUSIBLE_METHODS = {"flatten", "unflatten"}
COMPILE_TIMERS = ("_compile.compile_inner", "backward._backward_impl")  # torch._dynamo's, not nested
_COMPILED: dict[str, nn.Module] = {}  # a run's structure -> its compiled module, process-wide


def compile_regions(module: torch.fx.GraphModule) -> int:
    """Rewrite ``module`` in place so each run of plain tensor operations (checkpointed blocks'
    insides included) calls one shared compiled module; the number of runs."""
    _hoist_rotary_tables(module)
    count = sum(compile_regions(child.block) for child in module.children() if isinstance(child, CheckpointedBlock))
    for index, nodes in enumerate(_runs(module.graph)):
        varying = tuple(not _is_weight(source) for source in run_inputs(nodes))
        extract(module, nodes, f"compiled_run_{index}", partial(_compiled_run, _ops(nodes), varying))
        count += 1
    module.graph.lint()
    module.recompile()
    return count


class CompiledRun(nn.Module):
    """One run of a graph, through the compiled module it shares with every run of its
    structure; it shows as the operations it fuses (``ExecGraph.summary``)."""

    def __init__(self, compiled: nn.Module, ops: str, varying: tuple[bool, ...]):
        super().__init__()
        self.shared = (compiled,)  # not a submodule: the process owns it, every graph shares it
        self.ops = ops
        self.varying = varying  # per input: an activation, whose leading sizes vary with the tokens

    def forward(self, *inputs):
        return self.shared[0](*(_as_traced(x, varies) for x, varies in zip(inputs, self.varying, strict=True)))

    def extra_repr(self) -> str:
        return f"compiled: {self.ops}"


def _as_traced(x, varies: bool):
    """``x`` as one trace serves it: an activation's leading sizes dynamic, and a weight a
    plain tensor, whether the graph holds it (a Parameter) or computes it (a gathered shard, a
    cast), since torch.compile guards on the type and would trace each kind apart."""
    if not isinstance(x, torch.Tensor):
        return x
    if isinstance(x, nn.Parameter):
        return x.view_as(x)  # differentiable: the gradient reaches the parameter as before
    if varies:
        for dim in range(x.dim() - 1):
            torch._dynamo.maybe_mark_dynamic(x, dim)
    return x


def compiled_runs() -> int:
    """How many distinct runs this process has compiled (each serves every block it repeats in)."""
    return len(_COMPILED)


def compile_seconds() -> float:
    """Seconds this process has spent in torch.compile so far: tracing and compiling forward
    graphs, and compiling their backward where that waits for the first backward pass (the
    timers torch._dynamo keeps; 0 before any compile). A process that never compiled has not
    imported torch._dynamo, and this does not import it (its import takes seconds)."""
    if "torch._dynamo.utils" not in sys.modules:
        return 0.0
    from torch._dynamo.utils import compilation_time_metrics

    return sum(sum(compilation_time_metrics.get(phase, ())) for phase in COMPILE_TIMERS)


def _is_weight(node: torch.fx.Node) -> bool:
    """Whether ``node`` is a parameter, or computed from one alone (a cast, a view)."""
    if node.op == "get_attr":
        return True
    sources = node.all_input_nodes
    return node.op in ("call_function", "call_method") and len(sources) == 1 and _is_weight(sources[0])


def _fusible(node: torch.fx.Node) -> bool:
    if node.op == "call_function":
        return node.target in FUSIBLE_FUNCTIONS
    return node.op == "call_method" and node.target in FUSIBLE_METHODS


def _defines_inputs(node: torch.fx.Node) -> bool:
    """Whether ``node`` only defines values a run may read (parameters, inputs, rotary tables):
    it does not end a run."""
    if node.op in ("get_attr", "placeholder"):
        return True
    source = node.args[0] if node.target is item else None
    return node.target is gather_tables or (isinstance(source, torch.fx.Node) and source.target is gather_tables)


def _runs(graph: torch.fx.Graph) -> list[list[torch.fx.Node]]:
    """Maximal runs of consecutive fusible nodes that hold some arithmetic (not views alone)."""
    runs: list[list[torch.fx.Node]] = [[]]
    for node in graph.nodes:
        if _fusible(node):
            runs[-1].append(node)
        elif not _defines_inputs(node) and runs[-1]:
            runs.append([])
    return [run for run in runs if any(n.op == "call_function" for n in run)]


def _hoist_rotary_tables(module: torch.fx.GraphModule) -> None:
    """Every ``apply_rotary(x, cos, sin, positions)`` becomes ``rotate(x, *tables)``, the
    tables gathered once for each (cos, sin, positions), right where all three are defined."""
    graph = module.graph
    tables = {}
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not apply_rotary:
            continue
        x, *sources = node.args
        key = tuple(sources)
        if key not in tables:
            last = max(sources, key=_position(graph))
            with graph.inserting_after(last):
                gathered = graph.call_function(gather_tables, key)
            with graph.inserting_after(gathered):
                cos = graph.call_function(item, (gathered, 0))
            with graph.inserting_after(cos):
                tables[key] = cos, graph.call_function(item, (gathered, 1))
        with graph.inserting_after(node):
            rotated = graph.call_function(rotate, (x, *tables[key]))
        node.replace_all_uses_with(rotated)
        graph.erase_node(node)


def _ops(nodes: list[torch.fx.Node]) -> str:
    """The run's arithmetic, in order, repeats counted: 'rms_norm, linear x3, rotate x2'."""
    names = [n.target.__name__ for n in nodes if n.op == "call_function"]  # type: ignore[union-attr]
    grouped = [(name, len(list(repeats))) for name, repeats in itertools.groupby(names)]
    return ", ".join(name if count == 1 else f"{name} x{count}" for name, count in grouped)


def _position(graph: torch.fx.Graph):
    order = {node: i for i, node in enumerate(graph.nodes)}
    return lambda node: order[node]


def _compiled_run(ops: str, varying: tuple[bool, ...], run: torch.fx.GraphModule) -> CompiledRun:
    """The run extracted as ``run``, through the compiled module of its structure: ``run``
    itself compiled on first sight, then shared by every run of that structure."""
    key = _structure(run.graph)
    if key not in _COMPILED:
        _COMPILED[key] = cast("nn.Module", torch.compile(run))
    return CompiledRun(_COMPILED[key], ops, varying)


def _structure(graph: torch.fx.Graph) -> str:
    """The graph with its node names replaced by their order: equal for the same computation."""
    order = {node: i for i, node in enumerate(graph.nodes)}

    def ref(value):
        return torch.fx.node.map_arg(value, lambda n: f"%{order[n]}")

    lines = []
    for node in graph.nodes:
        target = node.target if isinstance(node.target, str) else f"{node.target.__module__}.{node.target.__qualname__}"
        lines.append(f"{node.op} {target if node.op != 'placeholder' else ''} {ref(node.args)!r} {ref(node.kwargs)!r}")
    return "\n".join(lines)
