"""Tracing a model into an fx graph with sample shapes, on meta tensors (no memory)."""

from __future__ import annotations

import functools
import operator
import os
import sys
from types import FrameType

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.experts import routed_experts
from hotswitch.backend.models.llama import (
    add_bias,
    apply_rotary,
    build_model,
    causal_attention,
    rms_norm,
    scale,
    token_loss,
)

# fx target -> op kind with a deduction rule (see rules.py)
FUNCTION_OPS = {
    F.rms_norm: "rms_norm",
    rms_norm: "rms_norm",
    apply_rotary: "rotary",
    causal_attention: "attention",
    routed_experts: "experts",
    token_loss: "loss",
    F.silu: "silu",
    F.gelu: "gelu",
    torch.sigmoid: "sigmoid",  # a shared expert's gate
    F.linear: "linear",
    add_bias: "bias",
    scale: "scale",
    operator.add: "add",
    operator.mul: "mul",
    operator.matmul: "matmul",
    torch.matmul: "matmul",
    torch.transpose: "transpose",
    torch.permute: "permute",
    torch.reshape: "reshape",
}
METHOD_OPS = {
    "unflatten": "unflatten",
    "flatten": "flatten",
    "transpose": "transpose",
    "permute": "permute",
    "view": "reshape",
    "reshape": "reshape",
}
MODULE_OPS = {nn.Linear: "linear", nn.Embedding: "embedding"}

_TORCH_DIR = os.path.dirname(torch.__file__)
_SOURCE = "hotswitch_source"  # node.meta key: the model line that made the node


def source_line(node: torch.fx.Node) -> str:
    """'file.py:line in function' of the model code that created ``node``."""
    return node.meta.get(_SOURCE, "unknown source")


class _SourceTracer(torch.fx.Tracer):
    """fx's tracer, noting on every node the model line that made it. (fx's own
    ``record_stack_traces`` symbolizes through the profiler, whose first use imports
    ``torch._dynamo`` and ``torch._inductor``: seconds of CPU in every rank.)"""

    def create_node(self, *args, **kwargs) -> torch.fx.Node:
        node = super().create_node(*args, **kwargs)
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith((_TORCH_DIR, __file__)):
            frame = frame.f_back
        if frame is not None:
            code = frame.f_code
            node.meta[_SOURCE] = f"{os.path.basename(code.co_filename)}:{frame.f_lineno} in {code.co_name}"
        return node


def op_kind(node: torch.fx.Node, modules: dict[str, nn.Module]) -> str:
    """The rule name of a call node, or a ValueError naming the op and its source line."""
    if node.op == "call_function" and node.target in FUNCTION_OPS:
        return FUNCTION_OPS[node.target]
    if node.op == "call_method" and node.target in METHOD_OPS:
        return METHOD_OPS[node.target]
    module = modules[str(node.target)] if node.op == "call_module" else None  # the target: the module's name
    if module is not None and type(module) in MODULE_OPS:
        return MODULE_OPS[type(module)]
    what = getattr(node.target, "__name__", node.target) if module is None else type(module)
    supported = ", ".join(sorted({*FUNCTION_OPS.values(), *METHOD_OPS.values(), *MODULE_OPS.values()}))
    raise ValueError(
        f"no deduction rule for {node.op} {what!s} (node '{node.name}', {source_line(node)}); "
        f"express it with supported ops ({supported}) or add a rule in hotswitch/backend/graph/rules.py"
    )


def trace(model: nn.Module, batch: int = 2, seq: int = 16) -> torch.fx.GraphModule:
    """Trace ``model(tokens, targets, positions)`` and record every node's sample shape (meta
    tensors)."""
    graph = _SourceTracer().trace(model)
    module = torch.fx.GraphModule(model, graph)
    sample = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    ShapeProp(module).propagate(sample, sample, sample)
    return module


@functools.lru_cache(maxsize=8)
def trace_config(config: ModelConfig, batch: int = 2, seq: int = 16) -> torch.fx.GraphModule:
    """The model of ``config`` traced on meta tensors, once per process: about a second of CPU
    that every engine built and every change of its strategies would otherwise spend again. The
    graph is read, never changed (``LogicalGraph`` builds its own nodes from it)."""
    return trace(build_model(config, device="meta"), batch, min(seq, config.max_seq_len))
