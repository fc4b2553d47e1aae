"""Mixed precision and memory, measured side by side in one run on 4 CPU ranks (or a GPU).

- ``fp32_worst_loss_rel``: a hot-switched plan of three strategies (one pipelined) in fp32
  against one device, worst step;
- ``bf16``: the same plan in bf16 (fp32 masters, fp32 gradients) against one device in bf16
  (``worst_loss_rel_vs_reference``);
- ``param_switch_bytes_bf16_over_fp32``: the bytes its parameter switches moved, bf16 over fp32;
- ``activation_bytes_ckpt_over_none`` and ``step_s_ckpt_over_none``: activation checkpointing,
  the bytes autograd saves for backward (counted by ``saved_tensors_hooks``) and the measured
  step time, at the benchmark's longest length;
- ``auto_ckpt_predicted_gain``: ``auto``'s predicted step time without checkpointed candidates
  over with them, under a budget where only tensor parallelism holds the longest sequences;
- ``mfu``: model FLOPs utilisation against the device's dense bf16 peak (None on CPU).

``--smoke``: 2 ranks, a plan of ``pp2``, ``tp2sp`` and ``dp2``, batches of 4 documents of up to 64
tokens, 2 steps, ``auto`` weighing ``tp2`` and ``dp2ckpt``; and the single-GPU figures
(``gpu``) for the tiny preset at 64 tokens where a GPU is, else ``gpu`` says it was skipped (the
output's ``smoke``).

    python -m benchmarks.precision --json
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

from benchmarks.common.promised import check_promised
from hotswitch.backend import get_config
from hotswitch.backend.data import BatchStream, DocumentSource, stdlib_documents
from hotswitch.backend.precision import Precision
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.state.optim import OptimizerConfig

MODEL, SEED = "tiny", 0


@dataclass(frozen=True)
class Sizes:
    """What the CPU figures train: ``plan`` on ``ranks`` ranks, batches of ``batch`` documents of
    up to ``max_len`` tokens, micro-batches of up to ``budget`` tokens; ``auto`` weighs
    ``candidates`` (None: all of ``candidate_strategies``)."""

    plan: tuple = (("tp2pp2", 96), ("dp2tp2sp", 40), ("dp4", 0))
    ranks: int = 4
    batch: int = 16
    max_len: int = 256
    budget: int = 1024
    candidates: tuple[str, ...] | None = None


SMOKE = Sizes(  # every document is 64 tokens long: trained under tp2sp, switched from and to pp2
    plan=(("pp2", 64), ("tp2sp", 32), ("dp2", 0)), ranks=2, batch=4, max_len=64, candidates=("tp2", "dp2ckpt")
)
SMOKE_STEPS = 2  # the checkpointing figures time the steps after the first
SMOKE_GPU = dict(preset="tiny", lengths=[64], repeat=1)
OUTPUT_KEYS = (
    "fp32_worst_loss_rel",
    "bf16.worst_loss_rel_vs_reference",
    "param_switch_bytes_bf16_over_fp32",
    "activation_bytes_ckpt_over_none",
    "step_s_ckpt_over_none",
    "auto_ckpt_predicted_gain",
    "mfu",
)


def stream(source: DocumentSource, sizes: Sizes) -> BatchStream:
    """The same batches from the start, every call (reading the documents takes seconds: read
    them once per process and pass them here)."""
    return BatchStream(source, sizes.batch, sizes.max_len, seed=SEED)


def one_device(steps: int, precision: Precision, sizes: Sizes, source: DocumentSource) -> list[float]:
    trainer = ReferenceTrainer(get_config(MODEL), OptimizerConfig(), SEED, sizes.budget, precision)
    batches = stream(source, sizes)
    return [trainer.step(batches.next_batch()) for _ in range(steps)]


def hot_switched(rank: int, world: int, steps: int, precisions: list[Precision], sizes: Sizes) -> dict:
    """Per precision: each step's loss and the bytes of each switch the first time it ran."""
    out, source = {}, stdlib_documents()
    for precision in precisions:
        plan = HotSwitchPlan.of(sizes.plan)
        instantiation = instantiation_strategy(plan.strategies)
        config = get_config(MODEL)
        run = engine_run(sizes.budget, seed=SEED, **precision.as_settings())
        engine = Engine(config, plan.strategies, instantiation, run)
        order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
        batches, losses, switches = stream(source, sizes), [], []
        for _ in range(steps):
            losses.append(engine.step(plan.assign(batches.next_batch()), order).loss)
            switches += engine.take_switch_stats()
        out[str(precision)] = {"losses": losses, "switches": switches}
    return out


def worst(losses: list[float], reference: list[float]) -> float:
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))


def switch_bytes(switches: list[dict], what: str) -> int:
    return sum(s["bytes"] for s in switches if s["what"] == what)


def precision_figures(steps: int, sizes: Sizes) -> dict:
    fp32, bf16 = Precision.of("fp32"), Precision.of("bf16")
    runs = spawn_ranks(hot_switched, sizes.ranks, steps, [fp32, bf16], sizes, timeout=1800)[0]
    source = stdlib_documents()
    bf16_error = worst(runs["bf16"]["losses"], one_device(steps, bf16, sizes, source))
    return {
        "fp32_worst_loss_rel": worst(runs["fp32"]["losses"], one_device(steps, fp32, sizes, source)),
        "bf16": {"worst_loss_rel_vs_reference": bf16_error, "steps": steps},
        "param_switch_bytes_bf16_over_fp32": switch_bytes(runs["bf16"]["switches"], "params")
        / switch_bytes(runs["fp32"]["switches"], "params"),
    }


def checkpointing(rank: int, world: int, steps: int, sizes: Sizes) -> dict:
    """dp4 against dp4ckpt: bytes kept for backward at the longest length, step time on the
    same batches; and auto's predicted step with and without checkpointed candidates under a
    budget at which only tensor parallelism over every rank holds the longest sequences."""
    import dataclasses
    import statistics
    import time

    from hotswitch.backend.strategy import Strategy
    from hotswitch.backend.train.planning.auto import auto_plan, candidate_strategies
    from hotswitch.backend.train.planning.memory import budget_holding
    from hotswitch.backend.train.planning.memory_measure import measured_activation_bytes
    from hotswitch.backend.train.planning.profile import profile, profile_lengths

    config, plain, ckpt = get_config(MODEL), Strategy(dp=world), Strategy(dp=world, ckpt=True)
    source = stdlib_documents()
    engine = Engine(config, [plain, ckpt], plain, engine_run(sizes.budget, seed=SEED))
    kept = {s: measured_activation_bytes(engine, s, sizes.max_len) for s in (plain, ckpt)}
    seconds = {}
    for s in (plain, ckpt):
        batches, times = stream(source, sizes), []
        for _ in range(steps):
            groups = {s: batches.next_batch()}
            started = time.perf_counter()
            engine.step(groups, [s] if s == plain else [s, plain])
            times.append(time.perf_counter() - started)
        seconds[s] = statistics.median(times[1:])
    candidates = candidate_strategies(config, world)
    if sizes.candidates:  # a shorter profile: only these (the ckpt one among them)
        candidates = [s for s in candidates if str(s) in {str(Strategy.parse(c)) for c in sizes.candidates}]
    budget = 1.05 * budget_holding(config, Strategy(tp=world), sizes.max_len)
    full = Engine(config, candidates, candidates[0], engine_run(sizes.budget, seed=SEED))
    cost = profile(full, candidates, profile_lengths(sizes.max_len), budget)
    without = dataclasses.replace(cost, strategies={s: c for s, c in cost.strategies.items() if not s.ckpt})
    batches, max_len = stream(source, sizes), sizes.max_len
    lengths = [[q.length for q in batches.next_batch()] for _ in range(8)]
    predicted = [
        (auto_plan(n, without, candidates[0], max_len)[1], auto_plan(n, cost, candidates[0], max_len)) for n in lengths
    ]
    return {
        "activation_bytes_ckpt_over_none": kept[ckpt] / kept[plain],
        "step_s_ckpt_over_none": seconds[ckpt] / seconds[plain],
        "auto_ckpt_predicted_gain": sum(a for a, _ in predicted) / sum(b[1] for _, b in predicted),
        "auto_picks_ckpt_in_batches": sum(ckpt in b[0].strategies for _, b in predicted),
    }


def gpu_step(
    rank: int, world: int, preset: str, lengths: list[int], repeat: int, layers: int | None, per_step: int
) -> list[dict]:
    """One GPU, bf16, ``per_step`` sequences of each length per step, in one micro-batch: step
    seconds, tokens/s, MFU, peak memory against the memory model's prediction. ``layers`` keeps
    a large preset's shape (its width, heads, vocabulary) with fewer layers, so that its
    optimizer fits one GPU."""
    import torch

    from hotswitch.backend.data.stream import Sequence
    from hotswitch.backend.models.flops import peak_flops, train_flops
    from hotswitch.backend.sim.paper.calibrate_h200 import one_gpu_peak_bytes
    from hotswitch.backend.strategy import Strategy

    bf16, single = Precision.of("bf16"), Strategy()
    config = get_config(preset).with_(max_seq_len=max(lengths), **({"n_layers": layers} if layers else {}))
    run = engine_run(per_step * max(lengths), seed=SEED, device="cuda", **bf16.as_settings())
    engine = Engine(config, [single], single, run)
    peak, rows = peak_flops(torch.cuda.get_device_name()), []
    for length in lengths:
        batch = [
            Sequence(i, tuple(torch.randint(0, config.vocab_size, (length + 1,)).tolist())) for i in range(per_step)
        ]
        engine.step({single: batch}, [single])  # warm-up: kernels chosen, memory pools grown
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        seconds = []
        for _ in range(repeat):
            started = torch.cuda.Event(enable_timing=True)
            ended = torch.cuda.Event(enable_timing=True)
            started.record()
            engine.step({single: batch}, [single])
            ended.record()
            torch.cuda.synchronize()
            seconds.append(started.elapsed_time(ended) / 1e3)
        step_s = sorted(seconds)[len(seconds) // 2]
        predicted = one_gpu_peak_bytes(config, per_step, length, bf16)
        rows.append(
            {
                "tokens": per_step * length,
                "sequences": per_step,
                "step_s": step_s,
                "tokens_per_s": per_step * length / step_s,
                "mfu": per_step * train_flops(config, length) / step_s / peak if peak else None,
                "peak_memory_bytes": torch.cuda.max_memory_allocated(),
                "predicted_memory_bytes": predicted,
            }
        )
    return rows


def gpu_figures(preset: str, lengths: list[int], repeat: int, layers: int | None = None, per_step: int = 1) -> dict:
    import torch

    args = (preset, lengths, repeat, layers, per_step)
    rows = spawn_ranks(gpu_step, 1, *args, backend="cpu:gloo,cuda:nccl", timeout=1800)[0]
    name = torch.cuda.get_device_name()
    return {"device": name, "preset": preset, "layers": layers, "precision": "bf16", "runs": rows}


def smoke_gpu() -> dict:
    """The single-GPU figures at ``SMOKE_GPU``'s size, or why they were skipped."""
    import torch

    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device here: the single-GPU figures need one"}
    return gpu_figures(**SMOKE_GPU)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: also the single-GPU figures")
    parser.add_argument("--preset", default="1b", help="the model of the single-GPU figures")
    parser.add_argument("--layers", type=int, help="the preset's shape with this many layers (fits one GPU)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096, 8192])
    parser.add_argument("--per-step", type=int, default=1, help="sequences of each length per step (one micro-batch)")
    parser.add_argument("--gpu-only", action="store_true", help="--device cuda: skip the 4-rank CPU figures")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help=f"a tiny run: {SMOKE}, {SMOKE_STEPS} steps, {SMOKE_GPU}")
    args = parser.parse_args()
    sizes, steps = (SMOKE, SMOKE_STEPS) if args.smoke else (Sizes(), args.steps)
    out = {"mfu": None}
    if not args.gpu_only:
        cpu = spawn_ranks(checkpointing, sizes.ranks, steps, sizes, timeout=1800)[0]
        out.update(precision_figures(steps, sizes), **cpu)
    if args.smoke:
        out["gpu"] = smoke_gpu()
        out["smoke"] = {**asdict(SMOKE), "steps": SMOKE_STEPS, "gpu": SMOKE_GPU}
    elif args.device == "cuda":
        out["gpu"] = gpu_figures(args.preset, args.lengths, 5, args.layers, args.per_step)
    if "runs" in out.get("gpu", {}):
        out["mfu"] = max((r["mfu"] for r in out["gpu"]["runs"] if r["mfu"] is not None), default=None)
    print(json.dumps(out, indent=1) if args.json else out)
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
