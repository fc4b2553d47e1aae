"""``hotswitch train``: headless hot-switch training on local ranks through torchrun."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hotswitch.backend.runtime.devices import DEVICE_KINDS
from hotswitch.backend.train.loop.events import summarize
from hotswitch.kernel.cli import progress
from hotswitch.kernel.cli.headless import check_launch, follow
from hotswitch.kernel.launch.named import KUBEFLOW_BACKENDS, LAUNCHERS, launcher_options, make_launcher
from hotswitch.kernel.notebook.job import Job

BODY = """\
from hotswitch.backend.train.run.recipe import run
run({spec!r}, job.emit, job.control)
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train on local ranks with hot switching, headless",
        description="Settings come from the defaults, then --config run.toml, then the flags given.",
        argument_default=argparse.SUPPRESS,  # a flag not given leaves the config's value
    )
    p.add_argument("-n", "--nproc", type=int, default=4, help="ranks per node (default 4)")
    add_launcher_arguments(p)
    p.add_argument("--config", help="a TOML run configuration (the recipe's keys); flags override it")
    p.add_argument("--model", help="tiny (default), 125m, 1b, 7b, ..., or hf:DIR (a Hugging Face LLaMA checkpoint)")
    p.add_argument(
        "--data", nargs="+", help="'stdlib' (default), 'synthetic:github', or text/JSONL/Parquet/Arrow files"
    )
    p.add_argument("--text-field", help="the field or column holding each document's text (default 'text')")
    p.add_argument("--tokenizer", help="'byte' (default), 'bpe:N' (a BPE trained on the data) or hf:DIR")
    p.add_argument("--export-hf", help="write the trained model here as a Hugging Face checkpoint")
    p.add_argument("--steps", type=int, help="steps in all (default 20)")
    p.add_argument("--batch-size", type=int, help="sequences per global batch (default 16)")
    p.add_argument("--max-len", type=int, help="tokens per sequence at most (default 256)")
    p.add_argument("--plan", help="'auto' (default), one strategy ('dp4'), or buckets 'tp4:128,dp2tp2:48,dp4:0'")
    p.add_argument("--memory-budget", type=float, help="bytes per device the plan must fit in")
    p.add_argument("--token-budget", type=int, help="tokens per micro-batch, padding included (default 1024)")
    p.add_argument("--seed", type=int, help="(default 0)")
    p.add_argument("--lr", type=float, help="peak learning rate (default 1e-3)")
    p.add_argument("--lr-schedule", choices=("constant", "cosine"), help="cosine: warmup, then decay to --min-lr")
    p.add_argument("--warmup-steps", type=int, help="linear warmup steps of the learning rate (default 0)")
    p.add_argument("--min-lr", type=float, help="the cosine schedule's final learning rate (default 0)")
    p.add_argument("--weight-decay", type=float, help="AdamW's weight decay (default 0.1)")
    p.add_argument("--max-grad-norm", type=float, help="clip gradients to this global norm (default 1.0)")
    p.add_argument(
        "--shard-optimizer",
        action=argparse.BooleanOptionalAction,
        help="shard master weights and AdamW's moments over data parallelism (default: where dp > 1)",
    )
    p.add_argument(
        "--context-parallel",
        action=argparse.BooleanOptionalAction,
        help="--plan auto: weigh context-parallel layouts too (default: where --max-len >= 4096)",
    )
    p.add_argument("--checkpoint", help="save a checkpoint here at the end (must not exist)")
    p.add_argument("--checkpoint-every", type=int, help="checkpoint every N steps into ./checkpoints/step-N")
    p.add_argument("--keep-checkpoints", type=int, help="keep the newest K periodic checkpoints")
    p.add_argument("--resume-from", help="resume from this checkpoint")
    p.add_argument("--eval-every", type=int, help="held-out loss every N steps (an eval event)")
    p.add_argument("--eval-batches", type=int, help="global batches per evaluation (default 1)")
    p.add_argument("--device", choices=DEVICE_KINDS, help="cpu (gloo, default) or cuda (one GPU per rank, NCCL)")
    p.add_argument("--precision", choices=("fp32", "bf16"), help="bf16: bf16 compute, fp32 masters (default fp32)")
    p.add_argument("--grad-dtype", choices=("fp32", "bf16"), help="bf16 only: the gradients' dtype (default fp32)")
    p.add_argument(
        "--track", action="append", metavar="TARGET", help="tensorboard:DIR, mlflow:URI or wandb; repeatable"
    )
    p.add_argument("--timeout", type=float, default=None, help="seconds before the job is stopped")
    p.add_argument("--json", action="store_true", default=False, help="print the summary as JSON")
    p.set_defaults(run=run)


def add_launcher_arguments(p) -> None:
    """Where the ranks run: the launcher and its options (those of ``%%train``)."""
    p.add_argument(
        "--launcher", choices=LAUNCHERS, default="local", help="local (torchrun here), ray, slurm or kubeflow"
    )
    p.add_argument("--nodes", type=int, default=1, help="nodes, with --launcher ray, slurm or kubeflow (default 1)")
    p.add_argument("--ray-address", default=None, help="--launcher ray: the head's HOST:PORT ($RAY_ADDRESS)")
    p.add_argument("--partition", default=None, help="--launcher slurm: the partition")
    p.add_argument("--time", default=None, help="--launcher slurm: the time limit, e.g. 2:00:00")
    p.add_argument("--gpus-per-node", type=int, default=None, help="--launcher slurm: GPUs per node")
    p.add_argument(
        "--channel-host",
        default="127.0.0.1",
        help="address the ranks reach this process on (other machines: encrypted)",
    )
    p.add_argument("--namespace", default=None, help="--launcher kubeflow: the TrainJob's Kubernetes namespace")
    p.add_argument("--image", default=None, help="--launcher kubeflow: the pods' image, with hotswitch and torch")
    p.add_argument("--resources", default=None, help="--launcher kubeflow: per node, e.g. cpu=8,memory=32Gi,gpu=4")
    p.add_argument(
        "--kubeflow-backend", choices=KUBEFLOW_BACKENDS, default=None, help="--launcher kubeflow: kubernetes or local"
    )


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
    """The run's settings: ``--config``'s, overridden by the flags given (paths made absolute)."""
    from hotswitch.backend.train.run.run_config import KNOWN, load_toml

    spec = load_toml(args.config) if getattr(args, "config", None) else {}
    given = {key: getattr(args, key) for key in KNOWN if hasattr(args, key)}
    if "data" in given:
        data = given["data"]
        one = len(data) == 1 and (data[0] == "stdlib" or ":" in data[0])
        given["data"] = data[0] if one else [str(Path(p).resolve()) for p in data]
    if "plan" in given:
        given["plan"] = parse_plan(given["plan"])
    for key in ("checkpoint", "resume_from", "export_hf"):
        if key in given:
            given[key] = str(Path(given[key]).resolve())
    return {**spec, **given}


def train(
    spec: dict,
    nproc: int,
    timeout: float | None = None,
    show_progress: bool = True,
    launcher=None,
    nodes: int = 1,
    host: str = "127.0.0.1",
) -> tuple[Job, dict]:
    """Launch the run, follow it to the end (Ctrl-C stops it cleanly); the job and its summary."""

    def show(events: list[dict]) -> None:
        steps = [e for e in events if e.get("type") == "step"]
        if steps and show_progress:
            progress.write(progress.bar(steps[-1]))

    job = follow("train", BODY.format(spec=spec), nproc, show, timeout, launcher, nodes, host)
    if show_progress:
        progress.write("\n")
    return job, summarize(job.events)


def check(spec: dict, nproc: int) -> dict:
    """Refuse a spec or a plan that cannot run before launching anything; the full spec."""
    from hotswitch.backend.layout import check_strategy
    from hotswitch.backend.train.planning.auto import auto_candidates
    from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, instantiation_strategy
    from hotswitch.backend.train.run.recipe import check_spec
    from hotswitch.backend.train.run.spec import check_budget
    from hotswitch.backend.train.run.spec_inputs import model_config

    spec = check_spec(spec)
    config = model_config(spec["model"])  # a preset or an hf:DIR checkpoint
    if spec["plan"] != "auto":
        for strategy in HotSwitchPlan.of(spec["plan"]).strategies:
            strategy.check_fits(nproc)
            check_strategy(config, strategy)
    else:  # auto instantiates on the candidate splitting the model states most, as the trainer does
        candidates = auto_candidates(config, nproc, spec["max_len"], spec["context_parallel"])
        check_budget(spec, config, HotSwitchPlan.of(instantiation_strategy(candidates)))
    return spec


def run(args) -> int:
    check_launch(args.nproc, args.timeout)
    if args.nodes < 1:
        raise ValueError(f"--nodes {args.nodes} starts nothing; give at least 1")
    spec = check(spec_from(args), args.nproc * args.nodes)
    launcher = make_launcher(args.launcher, **launcher_options(args))
    job, result = train(spec, args.nproc, args.timeout, not args.json, launcher, args.nodes, args.channel_host)
    if args.json:
        print(json.dumps({"status": job.status, **result}, indent=1))
    else:
        print(progress.table(result))
        print(f"job {job.status}")
    return 0 if job.status == "succeeded" else 1
