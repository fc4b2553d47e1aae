"""Moving a run of nodes out of an fx graph into a sub-module of their own (what activation
checkpointing and regional compilation both do): the run's outside inputs become the
sub-graph's placeholders, in order of first use, and the values read after the run its outputs,
in order; the outer graph calls the sub-module where the run ended."""

from __future__ import annotations

from collections.abc import Callable

import torch.fx
from torch import nn


def run_inputs(nodes: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """The outer nodes the run ``nodes`` reads, in order of first use: its sub-graph's inputs."""
    inside = set(nodes)
    return list(dict.fromkeys(s for n in nodes for s in n.all_input_nodes if s not in inside))


def _sub_graph(nodes: list[torch.fx.Node]) -> tuple[torch.fx.Graph, list[torch.fx.Node], list[torch.fx.Node]]:
    """The run ``nodes`` as a graph of its own, with the outer nodes it reads (its inputs) and
    the run's nodes read after it (its outputs)."""
    inside = set(nodes)
    inputs = run_inputs(nodes)
    outputs = [n for n in nodes if any(user not in inside for user in n.users)]
    sub = torch.fx.Graph()
    env = {source: sub.placeholder(f"in_{i}") for i, source in enumerate(inputs)}
    for node in nodes:
        env[node] = sub.node_copy(node, lambda n: env[n])
    sub.output(tuple(env[n] for n in outputs))
    return sub, inputs, outputs


def extract(
    module: torch.fx.GraphModule,
    nodes: list[torch.fx.Node],
    name: str,
    wrap: Callable[[torch.fx.GraphModule], nn.Module],
) -> None:
    """Replace ``nodes`` in ``module``'s graph by one call of ``wrap(sub-module)``, registered
    as ``name``. Call ``module.recompile()`` once every run is out."""
    sub, inputs, outputs = _sub_graph(nodes)
    module.add_submodule(name, wrap(torch.fx.GraphModule(module, sub)))
    with module.graph.inserting_after(nodes[-1]):  # every input (parameters too) is defined by then
        call = module.graph.call_module(name, tuple(inputs))
    anchor = call
    for i, node in enumerate(outputs):
        with module.graph.inserting_after(anchor):
            anchor = module.graph.call_function(item, (call, i))
        node.replace_all_uses_with(anchor)
    for node in reversed(nodes):
        module.graph.erase_node(node)


def item(values: tuple, index: int):
    """One output of an extracted run."""
    return values[index]
