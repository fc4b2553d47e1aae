"""Rank functions for the executable-graph tests (importable by spawned processes)."""

import torch
import torch.distributed as dist

from hotswitch.backend import Strategy, get_config, param_layout
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.models import IGNORE, build_model
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.process_groups import ProcessGroups, strategy_rank_sets


def sample_batch(config, rows: int = 4, seq: int = 12, seed: int = 3):
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, config.vocab_size, (rows, seq), generator=gen)
    targets = torch.randint(0, config.vocab_size, (rows, seq), generator=gen)
    targets[1, seq - 4 :] = IGNORE  # a shorter sequence, padded on the right
    targets[3, seq - 7 :] = IGNORE
    return tokens, targets


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def errors_against_reference(graph, strategy, rank, reference, loss, tokens, targets, groups):
    """(relative error of the loss, worst relative error of any gradient) of ``strategy``'s
    executable graph on this rank's rows of the batch, against the one-device ``reference``."""
    layout = param_layout(graph.config, strategy)
    params, grads = FlatBuffer(layout, rank), FlatBuffer(layout, rank)
    params.load_global(dict(reference.named_parameters()))
    exec_graph = compile_graph(graph, strategy, rank)
    exec_graph.attach(params, grads)
    exec_graph.bind(groups)
    dp = strategy.coords(rank).dp
    rows = slice(dp * tokens.shape[0] // strategy.dp, (dp + 1) * tokens.shape[0] // strategy.dp)
    local = exec_graph.forward_backward(tokens[rows], targets[rows], 1.0).clone()
    dist.all_reduce(local)  # every tp rank holds the same sum: divide them out
    if strategy.dp > 1:
        dist.all_reduce(grads.flat, group=groups[strategy.dp_group(rank)])
    worst = max(
        relative_error(grads.views[name], p.grad[grads.boxes[name].slices()])
        for name, p in reference.named_parameters()
        if name in grads.views
    )
    return relative_error(local / strategy.tp, loss.detach()), worst


def exec_matches_reference(rank: int, world: int, model: str, changes: dict, strategies: list[str]):
    """Per strategy: (relative error of the loss, worst relative error over every gradient)."""
    config = get_config(model).with_(**changes)
    reference = build_model(config, seed=0)
    tokens, targets = sample_batch(config)
    loss = reference(tokens, targets)
    loss.backward()
    graph = LogicalGraph.build(config, strategies)
    parsed = [Strategy.parse(s) for s in strategies]
    groups = ProcessGroups(strategy_rank_sets(parsed))
    return {str(s): errors_against_reference(graph, s, rank, reference, loss, tokens, targets, groups) for s in parsed}


class MatmulHead(torch.nn.Module):
    """The LLaMA model with its head written as ``x @ W.transpose(0, 1)`` (as with tied weights)."""

    def __init__(self, model):
        super().__init__()
        self.inner = model

    def forward(self, tokens, targets, positions):
        from hotswitch.backend.models.llama import token_loss

        m = self.inner
        x = m.tok_embeddings(tokens)
        for layer in m.layers:
            x = layer(x, m.rope_cos, m.rope_sin, positions)
        return token_loss(torch.matmul(m.norm(x), m.output.weight.transpose(0, 1)), targets)


def exec_matches_reference_with_model(rank: int, world: int, strategy_name: str):
    from hotswitch.backend.graph.trace import trace

    config = get_config("tiny").with_(n_layers=2)
    reference = build_model(config, seed=0)
    tokens, targets = sample_batch(config)
    loss = reference(tokens, targets)
    loss.backward()
    meta = MatmulHead(build_model(config, device="meta"))
    module = trace(meta)
    for node in module.graph.nodes:
        if node.op in ("get_attr", "call_module") and node.target.startswith("inner."):
            node.target = node.target.removeprefix("inner.")
    module = torch.fx.GraphModule(meta.inner, module.graph)
    strategy = Strategy.parse(strategy_name)
    graph = LogicalGraph(config, [strategy], module)
    groups = ProcessGroups(strategy_rank_sets([strategy]))
    return errors_against_reference(graph, strategy, rank, reference, loss, tokens, targets, groups)
