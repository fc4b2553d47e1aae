"""Regional compilation as a graph pass: what it compiles, what it leaves, that blocks share one
compiled module, and that a compiled graph computes what the eager one does (forward and
backward, in fp32, padded rows and packed documents, plain and checkpointed blocks)."""

import pytest
import torch

from hotswitch.backend import get_config, param_layout
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.compiled_regions import FUSIBLE_FUNCTIONS, CompiledRun
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.models.documents import row_positions
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.strategy import Strategy

CONFIG = get_config("tiny")


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def attached(strategy: str, fused: bool, device: str = "cpu", dtype: torch.dtype = torch.float32):
    s = Strategy.parse(strategy)
    graph = compile_graph(LogicalGraph.build(CONFIG, [s]), s, 0, fused)
    layout = param_layout(CONFIG, s)
    params, grads = FlatBuffer(layout, 0, dtype, device), FlatBuffer(layout, 0, torch.float32, device)
    params.flat.copy_(torch.randn(params.flat.shape, generator=torch.Generator().manual_seed(0)) * 0.02)
    grads.flat.zero_()
    graph.attach(params, grads)
    return graph, grads


def runs_of(graph) -> list[CompiledRun]:
    return [m for m in graph.module.children() if isinstance(m, CompiledRun)]


def test_every_run_of_tensor_math_is_compiled_and_blocks_share_one_compile():
    graph, _ = attached("dp1", fused=True)
    left = [n.target for n in graph.module.graph.nodes if n.op == "call_function" and n.target in FUSIBLE_FUNCTIONS]
    assert left == [], "no norm, projection, rotary or SwiGLU op stays outside a compiled run"
    outside = {getattr(n.target, "__name__", n.target) for n in graph.module.graph.nodes if n.op == "call_function"}
    assert {"embedding", "causal_attention", "fused_token_loss"} <= outside  # the loss: its own compiled kernels
    runs = runs_of(graph)
    assert len(runs) == CONFIG.n_layers + 1  # before the first attention, between each two, after the last
    middle = {id(run.shared[0]) for run in runs[1:-1]}
    assert len(middle) == 1, "the runs between attentions are one graph: one compiled module serves them all"
    ops = [node["op"] for node in graph.summary()["nodes"] if node["name"].startswith("compiled_run")]
    block = "linear, add, rms_norm, linear, silu, linear, mul, linear, add, rms_norm, linear x3, rotate x2"
    assert ops[1] == f"compiled: {block}"


def test_selective_recompute_stays_eager():
    graph, _ = attached("dp1sel", fused=True)
    assert runs_of(graph) == []


@pytest.mark.parametrize("strategy", ["dp1", "dp1ckpt"])
def test_a_compiled_graph_computes_what_the_eager_one_does(strategy):
    compare_compiled_with_eager(strategy, "cpu", torch.float32, loss_rtol=1e-6, grad_rtol=5e-6)


@GPU
def test_on_a_gpu_a_compiled_graph_computes_what_the_eager_one_does_in_bf16():
    compare_compiled_with_eager("dp1", "cuda", torch.bfloat16, loss_rtol=1e-2, grad_rtol=3e-2)


def compare_compiled_with_eager(strategy, device, dtype, loss_rtol, grad_rtol):
    eager, eager_grads = attached(strategy, False, device, dtype)
    compiled, compiled_grads = attached(strategy, True, device, dtype)
    assert runs_of(compiled) or any(runs_of_block(m) for m in compiled.module.children())
    gen = torch.Generator().manual_seed(1)
    for length, documents in [(48, [48]), (64, [20, 30, 14]), (40, [40])]:  # new shapes, packed rows
        tokens = torch.randint(0, CONFIG.vocab_size, (2, length), generator=gen).to(device)
        targets = torch.randint(0, CONFIG.vocab_size, (2, length), generator=gen).to(device)
        positions = row_positions(documents).repeat(2, 1)  # on the host, as the engine keeps them
        losses = [g.module(tokens, targets, positions) for g in (eager, compiled)]
        for loss in losses:
            loss.backward()
        assert abs(losses[0].item() - losses[1].item()) <= loss_rtol * abs(losses[0].item())
        # the gradient oracle's measure: relative norm of the difference (elementwise closeness
        # fails on fp32 summation-order noise where Inductor reorders a reduction, as on 16 cores)
        error = ((compiled_grads.flat - eager_grads.flat).norm() / eager_grads.flat.norm()).item()
        assert error <= grad_rtol, f"{length} tokens: gradients {error:.2e} from eager's (relative norm)"


def runs_of_block(module) -> list:
    block = getattr(module, "block", None)
    return [m for m in block.children() if isinstance(m, CompiledRun)] if block is not None else []
