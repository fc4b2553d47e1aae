"""The graph compiler's cost: run time of an executable graph, and time to compile a 7B model.

- ``exec_vs_eager``: one training step (forward + backward) of the one-rank executable
  graph divided by the same step of the eager model, same inputs, measured alternately
  in one process (median of ``--repeat`` pairs).
- ``compile_7b_32_s``: seconds to trace LLaMA-2 7B (on meta tensors), build the logical
  graph for three strategies of 32 virtual devices and compile every (strategy, rank)
  executable graph. No process is launched.

Beside them: ``eager_step_s``, ``exec_step_s``, and the compile's parts (``trace_7b_s``,
``logical_7b_s``, ``exec_graphs_7b_s``, ``exec_graphs``, ``exec_nodes``, ``logical_nodes``).
``--smoke``: the tiny model's step, and 7B's shape cut to 2 layers compiled for 4 devices (the
output's ``smoke`` says what ran).

    python -m benchmarks.compile --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from benchmarks.common.promised import check_promised
from hotswitch.backend import Strategy, get_config, param_layout
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.graph.trace import trace_config
from hotswitch.backend.models import build_model
from hotswitch.backend.runtime.flat_buffer import FlatBuffer

STRATEGIES_32 = ["dp32", "dp4tp8", "dp2tp16"]
SMOKE = dict(model="tiny", layers=1, batch=1, seq=16, repeat=1)
SMOKE_COMPILE = dict(layers=2, gpus=4, strategies=["dp4", "dp2tp2", "tp4"])
OUTPUT_KEYS = (
    "exec_vs_eager",
    "eager_step_s",
    "exec_step_s",
    "compile_7b_32_s",
    "trace_7b_s",
    "logical_7b_s",
    "exec_graphs_7b_s",
    "exec_graphs",
    "exec_nodes",
    "logical_nodes",
)


def step_ratio(model_name: str, layers: int, batch: int, seq: int, repeat: int) -> dict:
    config = get_config(model_name).with_(n_layers=layers)
    eager = build_model(config, seed=0)
    strategy = Strategy.parse("dp1")
    exec_graph = compile_graph(LogicalGraph.build(config, [strategy]), strategy, 0)
    layout = param_layout(config, strategy)
    params, grads = FlatBuffer(layout, 0), FlatBuffer(layout, 0)
    params.load_global(dict(eager.named_parameters()))
    exec_graph.attach(params, grads)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, config.vocab_size, (batch, seq), generator=gen)
    targets = torch.randint(0, config.vocab_size, (batch, seq), generator=gen)

    def eager_step():
        eager.zero_grad(set_to_none=False)
        eager(tokens, targets).backward()

    def exec_step():
        grads.flat.zero_()
        exec_graph.forward_backward(tokens, targets, 1.0)

    times = {"eager": [], "exec": []}
    for step in (eager_step, exec_step):  # warm-up
        step()
    for _ in range(repeat):
        for name, step in (("eager", eager_step), ("exec", exec_step)):
            started = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - started)
    eager_s, exec_s = statistics.median(times["eager"]), statistics.median(times["exec"])
    return {
        "exec_vs_eager": exec_s / eager_s,
        "eager_step_s": eager_s,
        "exec_step_s": exec_s,
        "step_model": f"{model_name} x {layers} layers",
        "step_tokens": batch * seq,
    }


def compile_7b(gpus: int = 32, strategies: list[str] = STRATEGIES_32, layers: int | None = None) -> dict:
    """``layers``: 7B's shape with that many layers (the default: all 32)."""
    config = get_config("7b").with_(**({"n_layers": layers} if layers else {}))
    started = time.perf_counter()
    module = trace_config(config)
    traced = time.perf_counter()
    graph = LogicalGraph(config, strategies, module)
    built = time.perf_counter()
    nodes = 0
    for strategy in graph.strategies:
        strategy.check_fits(gpus)
        for rank in range(gpus):
            nodes += len(compile_graph(graph, strategy, rank).module.graph.nodes)
    done = time.perf_counter()
    return {
        "compile_7b_32_s": done - started,
        "trace_7b_s": traced - started,
        "logical_7b_s": built - traced,
        "exec_graphs_7b_s": done - built,
        "exec_graphs": len(graph.strategies) * gpus,
        "exec_nodes": nodes,
        "logical_nodes": len(graph.nodes),
        "strategies_7b": [str(s) for s in graph.strategies],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--model", default="125m", help="model for the step comparison (default 125m)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run in seconds: {SMOKE}, {SMOKE_COMPILE}")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    compiled = compile_7b(**SMOKE_COMPILE) if args.smoke else compile_7b()
    out = {**step_ratio(args.model, args.layers, args.batch, args.seq, args.repeat), **compiled}
    if args.smoke:
        out["smoke"] = {**SMOKE, "compile": SMOKE_COMPILE}
    if not args.json:
        print(
            f"exec/eager step: {out['exec_vs_eager']:.3f}  7B on 32 devices compiled in {out['compile_7b_32_s']:.2f} s"
        )
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
