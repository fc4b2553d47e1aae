"""``hotswitch train``: headless hot-switch training on local ranks through torchrun."""

from __future__ import annotations

import json
from pathlib import Path

from hotswitch.backend.runtime.devices import DEVICE_KINDS
from hotswitch.backend.train.events import summarize
from hotswitch.kernel.cli import progress
from hotswitch.kernel.cli.headless import check_launch, follow
from hotswitch.kernel.notebook.job import Job

BODY = """\
from hotswitch.backend.train.recipe import run
run({spec!r}, job.emit, job.control)
"""


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train on local ranks with hot switching, headless")
    p.add_argument("-n", "--nproc", type=int, default=4, help="local ranks (default 4)")
    p.add_argument("--model", default="tiny", help="tiny, 125m, 1b, 7b, 13b, 32b (default tiny)")
    p.add_argument("--data", nargs="+", default=["stdlib"], help="'stdlib', 'synthetic:github', or text/JSONL files")
    p.add_argument("--tokenizer", default="byte", help="'byte', or 'bpe:N': a BPE of N tokens trained on the data")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16, help="sequences per global batch")
    p.add_argument("--max-len", type=int, default=256, help="tokens per sequence at most")
    p.add_argument("--plan", default="auto", help="'auto', one strategy ('dp4'), or buckets 'tp4:128,dp2tp2:48,dp4:0'")
    p.add_argument("--memory-budget", type=float, default=None, help="bytes per device the plan must fit in")
    p.add_argument("--token-budget", type=int, default=1024, help="tokens per micro-batch, padding included")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--checkpoint", default=None, help="save a checkpoint here at the end (must not exist)")
    p.add_argument("--resume-from", default=None, help="resume from this checkpoint")
    p.add_argument("--device", choices=DEVICE_KINDS, default="cpu", help="cpu (gloo) or cuda (one GPU per rank, NCCL)")
    p.add_argument("--timeout", type=float, default=None, help="seconds before the job is stopped")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(run=run)


def parse_plan(text: str):
    if text == "auto" or ":" not in text:
        return text
    buckets = []
    for part in text.split(","):
        strategy, _, bound = part.partition(":")
        if not bound.strip().isdigit():
            raise ValueError(f"--plan {text!r}: bucket {part!r} needs a whole-number lower bound, like 'tp4:128,dp4:0'")
        buckets.append([strategy.strip(), int(bound)])
    return buckets


def spec_from(args) -> dict:
    data = args.data[0] if len(args.data) == 1 and (args.data[0] == "stdlib" or ":" in args.data[0]) else args.data
    if isinstance(data, list):
        data = [str(Path(p).resolve()) for p in data]
    return {
        "model": args.model,
        "data": data,
        "tokenizer": args.tokenizer,
        "steps": args.steps,
        "batch_size": args.batch_size,
        "max_len": args.max_len,
        "plan": parse_plan(args.plan),
        "memory_budget": args.memory_budget,
        "token_budget": args.token_budget,
        "seed": args.seed,
        "lr": args.lr,
        "checkpoint": str(Path(args.checkpoint).resolve()) if args.checkpoint else None,
        "resume_from": str(Path(args.resume_from).resolve()) if args.resume_from else None,
        "device": args.device,
    }


def train(spec: dict, nproc: int, timeout: float | None = None, show_progress: bool = True) -> tuple[Job, dict]:
    """Launch the run, follow it to the end (Ctrl-C stops it cleanly); the job and its summary."""

    def show(events: list[dict]) -> None:
        steps = [e for e in events if e.get("type") == "step"]
        if steps and show_progress:
            progress.write(progress.bar(steps[-1]))

    job = follow("train", BODY.format(spec=spec), nproc, show, timeout)
    if show_progress:
        progress.write("\n")
    return job, summarize(job.events)


def check(spec: dict, nproc: int) -> dict:
    """Refuse a spec or a plan that cannot run before launching anything; the full spec."""
    from hotswitch.backend.layout import check_strategy
    from hotswitch.backend.models.config import get_config
    from hotswitch.backend.train.dispatch import HotSwitchPlan
    from hotswitch.backend.train.recipe import check_spec

    spec = check_spec(spec)
    config = get_config(spec["model"])
    if spec["plan"] != "auto":
        for strategy in HotSwitchPlan.of(spec["plan"]).strategies:
            strategy.check_fits(nproc)
            check_strategy(config, strategy)
    return spec


def run(args) -> int:
    check_launch(args.nproc, args.timeout)
    spec = check(spec_from(args), args.nproc)
    job, result = train(spec, args.nproc, args.timeout, show_progress=not args.json)
    if args.json:
        print(json.dumps({"status": job.status, **result}, indent=1))
    else:
        print(progress.table(result))
        print(f"job {job.status}")
    return 0 if job.status == "succeeded" else 1
