"""``hotswitch demo``: the quickstart's training, headless, measured against static strategies
and checked against one device."""

from __future__ import annotations

import json

from hotswitch.kernel.cli import progress
from hotswitch.kernel.cli.headless import check_launch, follow

BODY = """\
from hotswitch.backend.train.loop.compare import compare
compare({spec!r}, job)
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="hot switching vs the best static strategy on local ranks, checked against one device",
        description="Train a tiny LLaMA on local ranks with auto hot switching under a memory budget that the "
        "longest sequences only fit with the model split, then the static strategy the cost model predicts "
        "fastest among those that fit, on the same batches; compare throughput and check every step's loss "
        "against one-device training.",
    )
    p.add_argument("-n", "--nproc", type=int, default=4, help="local ranks (default 4)")
    p.add_argument("--steps", type=int, default=12, help="steps per run (default 12)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per global batch")
    p.add_argument("--max-len", type=int, default=256, help="targets per sequence at most (max-len + 1 tokens)")
    p.add_argument("--tokenizer", default="bpe:512", help="'byte' or 'bpe:N' trained on the code (default bpe:512)")
    p.add_argument(
        "--memory-budget",
        type=float,
        default=None,
        help="bytes per device (default: pure data parallelism holds a third of --max-len, so only tensor "
        "parallelism over every rank holds the longest sequences)",
    )
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32", help="bf16: bf16 compute, fp32 masters")
    p.add_argument("--grad-dtype", choices=("fp32", "bf16"), default=None, help="bf16 only: gradients' dtype (fp32)")
    p.add_argument("--warmup", type=int, default=1, help="first steps left out of the throughput (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=None, help="seconds before the job is stopped")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(run=run)


def spec_from(args) -> dict:
    """The spec every run of the demo trains, checked before anything starts."""
    from hotswitch.backend.train.run.recipe import check_spec

    check_launch(args.nproc, args.timeout)
    if args.warmup < 0:
        raise ValueError(f"--warmup {args.warmup} is negative; give 0 or more first steps to leave out")
    if args.steps <= args.warmup:
        raise ValueError(f"--steps {args.steps} leaves nothing to measure after --warmup {args.warmup}")
    spec = {
        "model": "tiny",
        "tokenizer": args.tokenizer,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "max_len": args.max_len,
        "memory_budget": args.memory_budget,
        "seed": args.seed,
        "precision": args.precision,
        "grad_dtype": args.grad_dtype,
    }
    check_spec(spec)
    if args.memory_budget is None:
        spec["memory_budget"] = data_parallel_holds_a_third(args.nproc, args.max_len, args.precision)
    return spec


def data_parallel_holds_a_third(world: int, max_len: int, precision: str = "fp32") -> float:
    """The per-device budget at which pure data parallelism holds sequences of a third of
    ``max_len``: the longest need the model split over every rank."""
    from hotswitch.backend.models.config import get_config
    from hotswitch.backend.precision import Precision
    from hotswitch.backend.strategy import Strategy
    from hotswitch.backend.train.planning.memory import budget_holding

    return budget_holding(get_config("tiny"), Strategy(dp=world), max_len // 3, Precision.of(precision))


def reference_losses(spec: dict, show_progress: bool = True) -> list[float]:
    """Each step's loss when one device trains the same batches from the same weights."""
    from hotswitch.backend.train.loop.reference import ReferenceTrainer
    from hotswitch.backend.train.run.recipe import batches, check_spec, optimizer, precision_of
    from hotswitch.backend.train.run.spec import run_config

    s = check_spec(spec)
    config = run_config(s).model.architecture()  # as the ranks train it (its auxiliary loss too)
    trainer = ReferenceTrainer(config, optimizer(s), s["seed"], s["token_budget"], precision_of(s))
    stream = batches(s, config)
    losses = []
    for step in range(s["steps"]):
        losses.append(trainer.step(stream.next_batch()))
        if show_progress:
            progress.write(f"\r{'one device':<20}step {step + 1}/{s['steps']}")
    if show_progress:
        progress.write("\n")
    return losses


class RunProgress:
    """A progress bar per run, labelled with it; each ends its line when its run is done."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, events: list[dict]) -> None:
        if self.quiet:
            return
        for e in events:
            if e.get("type") == "step":
                progress.write(f"\r{e['run']:<20}" + progress.bar(e).lstrip("\r"))
            elif e.get("type") == "done":
                progress.write("\n")


def run(args) -> int:
    from hotswitch.kernel.cli import demo_report  # the training stack: loaded by this command only

    spec = spec_from(args)
    bars = RunProgress(quiet=args.json)
    job, signalled = follow("demo", BODY.format(spec=spec), args.nproc, bars, args.timeout)
    if job.status != "succeeded":
        progress.write(f"hotswitch demo: job {job.status}" + (f": {job.exit_reason}\n" if job.exit_reason else "\n"))
        return signalled or 1
    reference = reference_losses(spec, show_progress=not args.json)
    verdict = demo_report.verdict(list(job.events), reference, args.warmup, args.precision)
    if args.json:
        print(json.dumps(verdict, indent=1))
    else:
        print(demo_report.table(verdict, args.warmup))
    return 0 if verdict["exact"] else 1
