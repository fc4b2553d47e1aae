"""Where a training step's time goes: the engine beside transformers (eager), on the same rows.

``peers.py`` says which side is faster; this says where each spends its step, so that a gap
can be put down to a kernel family rather than guessed at. Each side (``common.peer_sides``: the
same model, weights, tokens, micro-batches and optimizer as in ``peers.py``) is measured on a
row as ``peers.py`` measures it (``common.peer_sides.measure``), then takes one step under PyTorch's
profiler: on a GPU every kernel it launched, with its device time; on the CPU every operator
call, with its own time (its callees' left out). Those times are summed by kind (``KINDS``:
attention, matmul, optimizer (clipping's norms too, and the compiled update's one kernel),
compiled (Inductor's other fused kernels), copy
(casts too), element-wise (on the CPU every other operator), other).

Output: ``device``, ``torch``, ``transformers``, ``precision``, ``engine_compiled``,
``preset``, ``smoke``, and ``rows``, each with ``model``, ``shape``, ``tokens`` (per step) and
one entry per side, ``engine`` and ``transformers``, holding ``step_s`` (the unprofiled step's
seconds as ``peers.py`` reports them, or "oom" with a ``note``), ``busy_s`` (the profiled
step's kernel or operator seconds, summed), ``calls`` (kernels launched, or operators called,
in the profiled step), ``by_kind`` (seconds per kind) and ``top`` (the longest kernels or
operators: name, seconds, calls) and, on a GPU, ``idle`` (``common.idle.device_idle``: the device's
idle seconds in the profiled step, its gaps, and the host ranges open longest during them, the
engine's named ranges among them). On a GPU, ``step_s`` well above ``busy_s`` means the device
waited for the host. Each side's entry is also written to stderr as JSON once its row is done,
so that a run cut off by its time limit keeps what it measured.

Rows are ``peers.py``'s presets' (``--device cuda``: 1b at 32K tokens and its RefinedWeb-like
documents by default, where the engine's lead over transformers is smallest; ``--device cpu``;
``--smoke``), narrowed with ``--rows TEXT...`` as there.

    python -m benchmarks.breakdown --device cuda --json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict

import torch

from benchmarks.common.idle import device_idle
from benchmarks.common.peer_presets import (
    SMOKE,
    Documents,
    Preset,
    add_preset_arguments,
    preset_of,
    row_batches,
    timed_steps,
)
from benchmarks.common.peer_sides import PRECISIONS, EngineSide, TransformersSide, measure, release_memory
from benchmarks.common.promised import check_promised
from hotswitch.backend.precision import Precision
from hotswitch.backend.runtime.spawn import spawn_ranks

SIDES = ("engine", "transformers")
DEFAULT_ROWS = {"cuda": ["1b 1x32768", "1b refinedweb"], "cpu": ["ci 1x1024", "ci refinedweb"]}
TOP = 12  # the longest kernels or operators listed per side
# (kind, pattern on a kernel's or an operator's name), the first that matches: cuDNN's attention
# kernels name "sdpa" and "flash" beside "wgmma", hence attention before matmul
KINDS = (
    ("attention", r"flash|fmha|sdpa|scaled_dot_product|attention"),
    ("matmul", r"gemm|nvjet|xmma|cutlass|cublas|wgmma|aten::(mm|addmm|bmm|baddbmm)$"),
    ("optimizer", r"adam|multi_tensor|_foreach_|^triton_\w*_lerp_"),  # lerp: the compiled update's kernel
    ("compiled", r"^triton_|CompiledFunction|Torch-Compiled Region"),
    ("copy", r"memcpy|memset|copy|aten::(cat|fill_|zero_|to|_to_copy|clone)$|CatArrayBatched"),
    ("element-wise", r"elementwise|reduce|softmax|norm|index|scatter|gather|aten::"),
)
SIDE_KEYS = ("step_s", "busy_s", "calls", "by_kind", "top", "idle")
TOP_KEYS = ("device", "torch", "transformers", "precision", "engine_compiled", "preset", "smoke")
OUTPUT_KEYS = (*TOP_KEYS, "rows[].model", "rows[].shape", "rows[].tokens")
OUTPUT_KEYS += tuple(f"rows[].{side}.{key}" for side in SIDES for key in SIDE_KEYS)


def progress(message: str) -> None:
    print(f"[breakdown] {message}", file=sys.stderr, flush=True)


def kind_of(name: str) -> str:
    return next((kind for kind, pattern in KINDS if re.search(pattern, name, re.IGNORECASE)), "other")


def profiled(step, batch, cuda: bool) -> tuple[list[tuple[str, float]], dict | None]:
    """Each kernel (GPU) or operator call (CPU) of one ``step(batch)``: name and own seconds;
    on a GPU also where the device waited for the host (``common.idle.device_idle``)."""
    activities = [torch.profiler.ProfilerActivity.CPU]  # on a GPU too: kernels are read as its ops' children
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        step(batch)
        if cuda:
            torch.cuda.synchronize()
    events = profile.events()
    if cuda:
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        return [(e.name, e.time_range.elapsed_us() / 1e6) for e in kernels], idle_of(events, kernels)
    # ATen's operators, and compiled code's own time (its Inductor kernels record no operators)
    ops = [e for e in events if e.name.startswith("aten::") or kind_of(e.name) == "compiled"]
    return [(e.name, e.self_cpu_time_total / 1e6) for e in ops], None


def idle_of(events, kernels) -> dict:
    """The device's idle time in a profiled step and the host ranges open during it."""
    seconds = lambda e: (e.time_range.start / 1e6, e.time_range.end / 1e6)  # noqa: E731
    host = [(e.name, *seconds(e)) for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    span = (min(lo for _, lo, _ in host), max(hi for _, _, hi in host))
    return device_idle([seconds(e) for e in kernels], host, span)


def summarize(times: list[tuple[str, float]], step_s: float, idle: dict | None = None) -> dict:
    by_kind: dict[str, float] = defaultdict(float)
    per_name: dict[str, list[float]] = defaultdict(list)
    for name, seconds in times:
        by_kind[kind_of(name)] += seconds
        per_name[name].append(seconds)
    longest = sorted(per_name.items(), key=lambda item: -sum(item[1]))[:TOP]
    return {
        "step_s": step_s,
        "busy_s": sum(seconds for _, seconds in times),
        "calls": len(times),
        "by_kind": dict(sorted(by_kind.items(), key=lambda item: -item[1])),
        "top": [[name[:120], sum(seconds), len(seconds)] for name, seconds in longest],
        "idle": idle,
    }


def side_on_row(runner, row, batches: list, budget: int, preset: Preset, cuda: bool) -> dict:
    """``runner`` on a row, measured as ``peers.py`` measures it (warm-ups, then its timed
    steps), then one profiled step; where the device ran out of memory, what it said."""
    runner.restart()
    runner.use_budget(budget, documents=isinstance(row, Documents))
    done = measure(runner.step, batches, preset.warmups, timed_steps(preset, row), cuda)
    if not isinstance(done.step_s, float):
        empty = {"busy_s": None, "calls": 0, "by_kind": {}, "top": [], "idle": None}
        return {"step_s": done.step_s, **empty, "note": done.note}
    times, idle = profiled(runner.step, batches[0], cuda)
    return summarize(times, done.step_s, idle)


def line(figures: dict) -> str:
    """A side's figures on a row in one line (progress, and the table without ``--json``)."""
    if not isinstance(figures["step_s"], float):
        return f"{figures['step_s']} ({figures['note']})"
    kinds = ", ".join(f"{kind} {seconds:.3f}" for kind, seconds in figures["by_kind"].items())
    idle = f"; idle {figures['idle']['idle_s']:.3f} s in {figures['idle']['gaps']} gaps" if figures["idle"] else ""
    return f"{figures['step_s']:.4f} s a step; busy s by kind: {kinds}{idle}"


def build(side: str, config, device: torch.device, preset: Preset):
    mixed = device.type == "cuda"
    if side == "engine":
        return EngineSide(config, device, Precision.of("bf16" if mixed else "fp32"), preset.engine_compiled)
    return TransformersSide(config, device, mixed, compiled=False, same_weights=True)


def run_preset(rank: int, world: int, preset: Preset) -> dict:
    """Both sides on every row of ``preset`` (one side built at a time), as plain data."""
    import transformers

    cuda = preset.device == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if not cuda:
        torch.set_num_threads(1)  # as peers.py: CI-sized operators, shared cores
    rows = [(m, r, *row_batches(m.config, r)) for m in preset.models for r in m.rows]
    out = [
        {"model": m.label, "shape": r.label, "tokens": statistics.fmean(sum(s.length for s in b) for b in batches)}
        for m, r, batches, _ in rows
    ]
    for side in SIDES:
        runner, built_for = None, None
        for entry, (m, r, batches, budget) in zip(out, rows, strict=True):
            if built_for is not m:
                del runner
                release_memory()
                runner, built_for = build(side, m.config, device, preset), m
            progress(f"{m.label} {r.label}: {side}")
            entry[side] = side_on_row(runner, r, batches, budget, preset, cuda)
            progress(f"{m.label} {r.label}: {side} {line(entry[side])}")
            progress(f"{m.label} {r.label}: {side} as JSON {json.dumps(entry[side])}")  # kept if the run is cut off
        del runner
        torch.compiler.reset()
        release_memory()
    values = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "precision": PRECISIONS[preset.device],
        "engine_compiled": preset.engine_compiled,
        "preset": preset.name,
        "smoke": preset.name == SMOKE.name,
    }
    return {**values, "rows": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_preset_arguments(parser)
    args = parser.parse_args()
    preset = preset_of(parser, args, DEFAULT_ROWS)
    backend = "cpu:gloo,cuda:nccl" if preset.device == "cuda" else "gloo"
    out = spawn_ranks(run_preset, 1, preset, backend=backend, timeout=1800)[0]
    if not args.json:
        for row in out["rows"]:
            for side in SIDES:
                print(f"{row['model']} {row['shape']} {side}: {line(row[side])}")
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
