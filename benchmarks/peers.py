"""The engine's one-device training step against Hugging Face transformers' LlamaForCausalLM.

Same LLaMA shape, same random tokens, same starting weights, same micro-batches; one step is
forward, backward, gradient clipping and AdamW (fused on CUDA: PyTorch's multi-tensor kernel for
transformers, one compiled kernel with the clip and bf16 copy for the compiled engine) on every side
(``benchmarks/common/peer_sides.py`` says how each side runs):

- the engine: ``Engine`` with the single strategy, bf16 with fp32 master weights on CUDA, fp32
  on CPU; its runs of tensor math compiled as a run configuration's ``compile`` says (on CUDA,
  not on the CPU; ``--[no-]compile`` decides);
- transformers: ``attn_implementation="sdpa"``, fp32 weights under bf16 autocast on CUDA, plain
  fp32 on CPU, padded rows, gradient accumulation;
- transformers compiled: the same model under ``torch.compile`` (default options), built and
  compiled afresh for each row, so that its kernels are specialised to the row's shape; on the
  rows of the preset's ``compiled`` list, most wanted first, while the time budget allows.

Rows: ``shape`` is rows x tokens of each step, in one micro-batch, or ``refinedweb ...``: a few
batches of RefinedWeb-like documents (``sim.datasets.batch_lengths("commoncrawl")``, cut at a
cap): transformers packs them longest first into padded micro-batches within a token budget, as
its users do; the engine packs them back to back into rows of the budget (``packing``), its
attention staying within each document. Per
row: ``model``, ``shape``, ``tokens`` (per step; the mean over the batches of documents);
``engine_step_s``, ``transformers_step_s``, ``transformers_compiled_step_s``: seconds a step,
the median of the timed steps after the warm-ups (for documents, the mean over the batches),
``"oom"`` where the device ran out of memory, ``"skipped"`` where the preset or the budget left
it out, ``"error"`` where a side failed (``notes`` says which and why; only the compiled peer's
failures, and any on CUDA, are recorded rather than raised);
``engine_tokens_per_s``, ``transformers_tokens_per_s``, ``transformers_compiled_tokens_per_s``;
``mfu`` (the engine's), ``transformers_mfu``, ``transformers_compiled_mfu``: model FLOPs
utilisation by PaLM's convention (``models.flops.train_flops``) against the device's dense
bf16 peak, null on CPU;
``engine_peak_bytes``, ``transformers_peak_bytes``, ``transformers_compiled_peak_bytes``:
``torch.cuda.max_memory_allocated`` over the row, null on CPU; ``engine_attention``,
``transformers_attention``, ``transformers_compiled_attention``: the SDPA kernels a profiled step
ran (on rows of documents the engine's adds how its packed rows attend them, and what each way
took when it chose); ``transformers_over_engine``, ``transformers_compiled_over_engine``: step
seconds over the engine's (above 1: the engine is faster); ``transformers_compiled_compile_s``: its first step's
excess over a step (compilation); ``engine_compile_s``: the same for the engine, when
``engine_compiled``; ``engine_loss``, ``transformers_loss``: the first warm-up
step's mean token loss (each side starts every row from the same weights with a fresh
optimizer: they agree to rounding);
``notes``. Top level: ``device`` (the GPU's name, or "cpu"), ``torch``, ``transformers``
(versions), ``precision``, ``engine_compiled`` (whether the engine's runs were compiled),
``preset``, ``smoke`` (whether it is the smoke run), ``cpu_threads`` (intra-op threads: one in
the CPU presets), ``budget_s`` and ``elapsed_s`` (the timed rank's).

Presets: ``--device cuda`` (1b and the 7B shape with 8 layers, bf16: the engine and eager
transformers took 4.6 minutes on an H200, the compiled peer about 40 s a row more, while
``--budget`` allows), ``--device cpu`` (a CI-sized model; the default without CUDA), ``--smoke``
(the tiniest CPU run, no compilation). ``--rows TEXT...`` keeps the rows whose "model shape"
holds a TEXT (the compiled peer's rows then after the eager sides); ``--sides SIDE...`` runs only
those sides (``engine transformers_compiled``: the engine against the compiled peer, a short
lease not spent on eager rows already measured). Progress goes to stderr, with every side's
figures on a row as they are measured.

    python -m benchmarks.peers --device cuda --json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from dataclasses import replace

import torch

from benchmarks.common.peer_presets import (
    SMOKE,
    Documents,
    Model,
    Preset,
    add_preset_arguments,
    preset_of,
    row_batches,
    timed_steps,
)
from benchmarks.common.peer_sides import (
    ERROR,
    PRECISIONS,
    SKIPPED,
    EngineSide,
    Measured,
    TransformersSide,
    measure,
    release_memory,
)
from benchmarks.common.promised import check_promised
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.flops import peak_flops, train_flops
from hotswitch.backend.precision import Precision
from hotswitch.backend.runtime.spawn import spawn_ranks

SIDES = ("engine", "transformers", "transformers_compiled")
MFU_KEYS = {"engine": "mfu", "transformers": "transformers_mfu", "transformers_compiled": "transformers_compiled_mfu"}
ROW_KEYS = (
    "model",
    "shape",
    "tokens",
    *(f"{side}_{what}" for what in ("step_s", "tokens_per_s", "peak_bytes", "attention") for side in SIDES),
    *MFU_KEYS.values(),
    "transformers_over_engine",
    "transformers_compiled_over_engine",
    "transformers_compiled_compile_s",
    "engine_compile_s",
    "engine_loss",
    "transformers_loss",
    "notes",
)
TOP_KEYS = ("device", "torch", "transformers", "precision", "engine_compiled", "preset", "smoke")
TOP_KEYS += ("cpu_threads", "budget_s", "elapsed_s")
OUTPUT_KEYS = (*TOP_KEYS, *(f"rows[].{key}" for key in ROW_KEYS))


def progress(message: str) -> None:
    print(f"[peers] {message}", file=sys.stderr, flush=True)


def build_side(side: str, config: ModelConfig, device: torch.device, preset: Preset):
    mixed = device.type == "cuda"
    if side == "engine":
        return EngineSide(config, device, Precision.of("bf16" if mixed else "fp32"), preset.engine_compiled)
    # the eager peer starts from the engine's weights (its first loss is compared); the compiled
    # one keeps transformers' own initialisation, which costs no host time
    return TransformersSide(config, device, mixed, compiled=side != "transformers", same_weights=side == "transformers")


def run_side(side: str, model: Model, rows: dict, preset: Preset, measured: dict, admit=None) -> None:
    """``side``, built for ``model`` once a row is admitted, measured on each of ``rows`` (in
    order) that ``admit(key)`` lets through (all when None). A row that raises is recorded as
    ``ERROR`` with the message in its note (and the side built anew) where the side is the
    compiled peer or the device a GPU, whose one run must bring back every figure it got;
    elsewhere it is raised."""
    device = torch.device("cuda", 0) if preset.device == "cuda" else torch.device("cpu")
    tolerate = side == "transformers_compiled" or device.type == "cuda"
    runner = None
    for label, (row, batches, budget) in rows.items():
        key = (model.label, label)
        if admit is not None and not admit(key):
            continue
        progress(f"{model.label} {label}: {side}")
        try:
            if runner is None:
                runner = build_side(side, model.config, device, preset)
            runner.restart()  # every row from the same weights: its first losses compare
            runner.use_budget(budget, documents=isinstance(row, Documents))
            done = measure(runner.step, batches, preset.warmups, timed_steps(preset, row), preset.device == "cuda")
            if done.attention is not None:
                done = replace(done, attention=runner.attention(done.attention))
        except Exception as error:
            if not tolerate:
                raise
            runner, done = None, Measured(ERROR, note=f"failed: {type(error).__name__}: {error}".splitlines()[0])
        measured[key][side] = done
        progress(f"{model.label} {label}: {side} {done.summary()}")
        release_memory()
    del runner
    torch.compiler.reset()  # compiled code holds the model it was compiled for
    release_memory()


def admit_compiled(preset: Preset, rows: dict, measured: dict, started: float, key: tuple[str, str]) -> bool:
    """Whether the compiled peer's row ``key`` fits what is left of the budget: the longest
    compilation so far and its steps at the eager peer's pace (the engine's, or none, before
    they ran); a row that does not fit gets a ``SKIPPED`` entry saying so."""
    compiled = [sides["transformers_compiled"] for sides in measured.values() if "transformers_compiled" in sides]
    compile_s = max((m.first_step_s - m.step_s for m in compiled if isinstance(m.step_s, float)), default=0.0)
    row, batches, _ = rows[key[0]][key[1]]
    ran = [measured[key][side].step_s for side in ("transformers", "engine") if side in measured[key]]
    pace = next((step_s for step_s in ran if isinstance(step_s, float)), 0.0)
    needed = compile_s + pace * (max(preset.warmups, len(batches)) + 1 + timed_steps(preset, row) * len(batches))
    spent = time.monotonic() - started
    if spent + needed <= preset.budget_s:
        return True
    measured[key]["transformers_compiled"] = Measured(
        SKIPPED,
        note=f"skipped: {spent:.0f} s of the {preset.budget_s:.0f} s budget spent, about "
        f"{needed:.0f} s more needed (a compilation took up to {compile_s:.0f} s in this run)",
    )
    return False


def run_compiled(keys: tuple, preset: Preset, rows: dict, measured: dict, started: float) -> None:
    """The compiled peer on rows ``keys`` ((model, row) pairs), in order while the budget
    allows. Each row gets a model and a compilation of its own: compiled for one shape first,
    its kernels are specialised to it, whatever row ran before (a second shape in the same
    compiled code would make them dynamic); the documents row's shapes do turn dynamic."""
    models = {m.label: m for m in preset.models}
    admit = functools.partial(admit_compiled, preset, rows, measured, started)
    for name, label in keys:
        run_side("transformers_compiled", models[name], {label: rows[name][label]}, preset, measured, admit)


def ratio(a: float | str, b: float | str) -> float | None:
    return a / b if isinstance(a, float) and isinstance(b, float) else None


def side_figures(side: str, done: Measured, tokens: float, flops: float, peak: float | None) -> dict:
    timed = isinstance(done.step_s, float)
    return {
        f"{side}_step_s": done.step_s,
        f"{side}_tokens_per_s": tokens / done.step_s if timed else None,
        MFU_KEYS[side]: flops / done.step_s / peak if timed and peak else None,
        f"{side}_peak_bytes": done.peak_bytes,
        f"{side}_attention": done.attention,
    }


def output_row(
    model: Model, row, batches: list, sides: dict[str, Measured], peak: float | None, compiled: bool
) -> dict:
    tokens = statistics.fmean(sum(s.length for s in batch) for batch in batches)
    flops = statistics.fmean(sum(train_flops(model.config, s.length) for s in batch) for batch in batches)
    notes = [f"{side}: {sides[side].note}" for side in SIDES if sides[side].note]
    values = {"model": model.label, "shape": row.label, "tokens": tokens, "notes": notes}
    for side in SIDES:
        values.update(side_figures(side, sides[side], tokens, flops, peak))
    values["transformers_over_engine"] = ratio(values["transformers_step_s"], values["engine_step_s"])
    values["transformers_compiled_over_engine"] = ratio(values["transformers_compiled_step_s"], values["engine_step_s"])
    for side in ("transformers_compiled", "engine"):
        done = sides[side]
        timed = isinstance(done.step_s, float) and (side != "engine" or compiled)
        values[f"{side}_compile_s"] = done.first_step_s - done.step_s if timed else None
    values["engine_loss"], values["transformers_loss"] = (sides[s].first_loss for s in SIDES[:2])
    return {key: values[key] for key in ROW_KEYS}


def run_preset(rank: int, world: int, preset: Preset, sides: tuple[str, ...] = SIDES) -> dict:
    """Every one of ``sides`` on every row of ``preset`` (on this one rank), as the output's
    plain data; a side left out is "skipped" on every row, with a note."""
    import transformers

    started = time.monotonic()
    if preset.device == "cpu":
        # one intra-op thread: a CI-sized model's operators are too small to gain from more, and
        # where other processes share the cores every parallel region waits for a descheduled thread
        torch.set_num_threads(1)
    rows = {m.label: {r.label: (r, *row_batches(m.config, r)) for r in m.rows} for m in preset.models}
    measured = {(m.label, label): {} for m in preset.models for label in rows[m.label]}
    # the most wanted compiled row first: its compilation time then budgets the others, and no
    # compilation of unknown length starts near the end of the budget
    compiled = "transformers_compiled" in sides
    if compiled:
        run_compiled(preset.compiled[: preset.compiled_first], preset, rows, measured, started)
    for m in preset.models:
        for side in (side for side in SIDES[:2] if side in sides):
            run_side(side, m, rows[m.label], preset, measured)
    if compiled:
        run_compiled(preset.compiled[preset.compiled_first :], preset, rows, measured, started)
    for done in measured.values():
        if compiled:
            done.setdefault(
                "transformers_compiled", Measured(SKIPPED, note=f"not in the {preset.name} preset's compiled rows")
            )
        for side in SIDES:
            done.setdefault(side, Measured(SKIPPED, note="not asked for (--sides)"))
    cuda = preset.device == "cuda"
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    peak = peak_flops(device) if cuda else None
    out_rows = [
        output_row(m, row, batches, measured[m.label, label], peak, preset.engine_compiled)
        for m in preset.models
        for label, (row, batches, _) in rows[m.label].items()
    ]
    values = {
        "device": device,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "precision": PRECISIONS[preset.device],
        "engine_compiled": preset.engine_compiled,
        "preset": preset.name,
        "smoke": preset.name == SMOKE.name,  # the preset crossed to this process as a copy
        "cpu_threads": torch.get_num_threads(),
        "budget_s": preset.budget_s,
        "elapsed_s": time.monotonic() - started,
    }
    return {**{key: values[key] for key in TOP_KEYS}, "rows": out_rows}


def table(out: dict) -> str:
    lines = [f"{out['device']}, torch {out['torch']}, transformers {out['transformers']}, {out['precision']}"]
    for r in out["rows"]:
        steps = "  ".join(f"{side} {r[f'{side}_step_s']}" for side in SIDES)
        lines.append(f"{r['model']} {r['shape']}: {steps}  transformers/engine {r['transformers_over_engine']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_preset_arguments(parser)
    parser.add_argument("--budget", type=float, help="seconds the timed rank may spend (default: the preset's)")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=SIDES, help="the sides to run (default: all)")
    args = parser.parse_args()
    preset = preset_of(parser, args)
    if args.budget:
        preset = replace(preset, budget_s=args.budget)
    backend = "cpu:gloo,cuda:nccl" if preset.device == "cuda" else "gloo"
    out = spawn_ranks(run_preset, 1, preset, tuple(args.sides), backend=backend, timeout=2 * preset.budget_s + 600)[0]
    if not args.json:
        print(table(out))
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
