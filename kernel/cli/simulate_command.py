"""``hotswitch simulate``: one training step of a model on a described cluster, for every
contender (the paper's static baselines, its hand-picked hot switching, the paper's own
Megatron-LM / Hetu / DeepSpeed baselines, ``auto``, your plan), with a progress bar on stderr."""

from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("simulate", help="simulate a training step on a described GPU cluster (nothing launched)")
    p.add_argument(
        "--model",
        default="7b",
        help="model config: 7b, 13b, 32b (the paper's shapes), a released family's preset "
        "(llama3.2-1b, qwen3-8b, gemma3-4b, ...), or hf:DIR (a checkpoint's config.json alone)",
    )
    p.add_argument("--gpus", type=int, default=8, help="devices, 8 per server (default 8)")
    p.add_argument("--device", default="A800", help="A800 (default, the paper's), H100 or H200")
    p.add_argument(
        "--dataset",
        default=None,
        help="length distribution: commoncrawl (measured, the default), github (assumed), commoncrawl-synthetic, "
        "github-synthetic",
    )
    add_data_arguments(p)
    p.add_argument(
        "--contenders",
        default=None,
        help="comma-separated paper baselines to run (default all: megatron-paper, megatron-paper+recompute, "
        "hetu-static-paper, hotspa-c1-paper, deepspeed-paper); 'none' for none",
    )
    p.add_argument(
        "--switches",
        choices=("bound", "planned"),
        default="bound",
        help="switch times from their bound (default, seconds) or planned by the engine's planner (exact, slower)",
    )
    p.add_argument(
        "--context",
        type=int,
        default=32768,
        help="documents truncated at this many tokens (the paper's models take up to 131072 here)",
    )
    p.add_argument("--batch", type=int, default=512, help="sequences per global batch (default 512, the paper's)")
    p.add_argument(
        "--plan",
        default=None,
        help="your plan: a strategy ('dp2tp4pp1sp') or buckets 'tp8:16384,dp2tp4:4096,dp8:0' (longest first)",
    )
    _add_auto_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def _add_auto_arguments(p) -> None:
    """What ``auto`` weighs beyond the plain layouts: context parallelism, device groups, packing."""
    p.add_argument(
        "--context-parallel",
        action="store_true",
        help="also 'auto+cp': auto with context parallelism (cp ring attention, ul Ulysses) among its layouts; "
        "both autos then weigh one sequence's time alone too, as benchmarks/context.py does",
    )
    p.add_argument(
        "--side-by-side",
        action="store_true",
        help="also 'auto+groups': auto weighing two device groups trained side by side (e.g. 'tp4@0-3' for the "
        "longest documents beside 'dp4@4-7'), balanced by predicted compute",
    )
    p.add_argument(
        "--packing",
        action="store_true",
        help="our strategies pack micro-batches (documents back to back, attention per document) instead of "
        "padding rows to their longest",
    )


def add_data_arguments(p) -> None:
    """``--data`` and how its documents are read: the batch from your own corpus."""
    p.add_argument(
        "--data",
        nargs="+",
        default=None,
        help="your documents instead: text/JSONL/Parquet/Arrow files, folders or patterns, as hotswitch train reads "
        "them; the batch is the first global batch training would draw",
    )
    p.add_argument("--text-field", default="text", help="with --data: the field or column holding the text")
    p.add_argument("--prompt-field", default=None, help="with --data: the field holding each record's prompt")
    p.add_argument("--chat-field", default=None, help="with --data: the field holding each record's conversation")
    p.add_argument("--tokenizer", default="byte", help="with --data: byte (default), bpe:N or hf:DIR")


def parse_plan(text: str):
    """``"dp8"`` (static) or ``"tp8:16384,dp8:0"`` (strategy:lower-bound buckets), as ``--plan``
    of ``hotswitch train`` reads it."""
    from hotswitch.backend.train.config.parallelism import plan_from_text
    from hotswitch.backend.train.planning.dispatch import HotSwitchPlan

    return HotSwitchPlan.of(plan_from_text(text))


def _check(args) -> None:
    """Everything that can be wrong with the arguments, before anything is simulated."""
    from hotswitch.backend.sim.datasets import SELECTABLE
    from hotswitch.backend.sim.device import device_spec
    from hotswitch.backend.sim.paper.baselines import PAPER_CONTENDERS

    device_spec(args.device)
    if args.data is not None and args.dataset is not None:
        raise ValueError(f"--data with --dataset {args.dataset}: give your documents or a distribution, not both")
    if _dataset(args) not in SELECTABLE:
        raise ValueError(f"unknown dataset {args.dataset!r}; choose one of {', '.join(SELECTABLE)}")
    unknown = [n for n in _contenders(args) if n not in PAPER_CONTENDERS]
    if unknown:
        raise ValueError(f"unknown contender {unknown[0]!r}; choose from {', '.join(PAPER_CONTENDERS)} or 'none'")
    if args.gpus < 1 or args.batch < 1:
        raise ValueError(f"--gpus {args.gpus} and --batch {args.batch} must be at least 1")


def _dataset(args) -> str:
    return args.dataset or "commoncrawl"


def _lengths(args) -> tuple[list[int], str]:
    """The global batch's sequence lengths and where they come from: ``--data``'s documents (the
    first batch ``hotswitch train --batch-size BATCH --max-len CONTEXT`` would train, tokenised
    as it would), or ``--dataset``'s distribution."""
    from hotswitch.backend.sim.datasets import batch_lengths

    if args.data is None:
        return batch_lengths(_dataset(args), args.context, args.batch), _dataset(args)
    from hotswitch.backend.data.stream import BatchStream
    from hotswitch.backend.sim.scenario import sim_model
    from hotswitch.backend.train.run.recipe import read_documents

    model = sim_model(args.model, args.context)
    source = read_documents(args.data, args.text_field, args.tokenizer, model, args.prompt_field, args.chat_field)
    batch = BatchStream(source, args.batch, args.context).next_batch()
    return [s.length for s in batch], f"{source.describe()}, {source.tokenizer.name} tokens"


def _contenders(args) -> tuple[str, ...]:
    from hotswitch.backend.sim.paper.baselines import PAPER_CONTENDERS

    if args.contenders is None:
        return PAPER_CONTENDERS
    if args.contenders.strip() == "none":
        return ()
    return tuple(n.strip() for n in args.contenders.split(",") if n.strip())


def _progress(what: str, done: int, total: int, width: int = 30) -> None:
    """A bar on stderr, redrawn in place (stdout stays the table or the JSON)."""
    filled = width * done // max(total, 1)
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {what:<28}{end}")
    sys.stderr.flush()


def report(comparison, floor_s: float | None = None) -> dict:
    """The contenders of one comparison as plain values (what ``--json`` prints); ``floor_s``:
    the floor under its plans, where computed."""
    setup = comparison.setup
    return {
        "model": setup.config.name,
        "gpus": setup.cluster.world_size,
        "device": setup.spec.name,
        "context": setup.context,
        "sequences": len(setup.lengths),
        "tokens": sum(setup.lengths),
        "best_static": comparison.best_static.name if comparison.best_static else None,
        # every contender's peak_gib (model states, optimizer share, its largest micro-batch's
        # activations) is held within this one limit: the device's memory less what is reserved
        "limit_gib": (setup.spec.memory - setup.spec.reserved) / 2**30,
        # the simulator runs no kernels: attention is as fast as what its calibration measured
        "attention": {"kernel": setup.spec.attention_kernel, "fraction_of_peak": setup.spec.attention_mfu},
        "contenders": [c.summary() for c in comparison.contenders()],
        "notices": list(setup.notices),  # e.g. Ulysses asked where the heads do not split: ring runs
        "cp_speedup": comparison.cp_speedup,  # auto over auto+cp, with --context-parallel
        "groups_speedup": comparison.groups_speedup,  # auto over auto+groups, with --side-by-side
        "floor_s": floor_s,  # no plan over the layouts auto weighed takes less (sim.floor)
    }


def _print_table(out: dict) -> None:
    print(
        f"{out['model']} on {out['gpus']} x {out['device']}: {out['sequences']} sequences, "
        f"{out['tokens']:,} tokens, context {out['context']} ({out['data']})"
    )
    print(f"peak GiB: per device, within the limit of {out['limit_gib']:.1f} GiB (device memory less reserved)")
    print("step: on the device model; predicted: what the planner's fitted costs said (the engine's plans)")
    attention = out["attention"]
    print(f"attention: {attention['fraction_of_peak']:.0%} of peak, as measured of {attention['kernel']}")
    print(f"{'contender':<26}{'step':>10}{'predicted':>11}{'peak GiB':>10}  plan")
    for c in out["contenders"]:
        step = f"{c['step_s']:.2f}s" if c["step_s"] is not None else "no fit"
        predicted = f"{c['predicted_s']:.2f}s" if c.get("predicted_s") is not None else ""
        memory = max(c["memory_gib"].values(), default=0.0)
        detail = c["plan"] if c["step_s"] is not None else c["why"]
        print(f"{c['name']:<26}{step:>10}{predicted:>11}{memory:>10.1f}  {detail}")
    if out["cp_speedup"]:
        print(f"context parallelism: auto+cp is {out['cp_speedup']:.2f}x auto")
    if out["groups_speedup"]:
        print(f"device groups side by side: auto+groups is {out['groups_speedup']:.2f}x auto")
    if out["floor_s"]:
        best = min((c["step_s"] for c in out["contenders"] if c["step_s"]), default=None)
        beside = f"; the fastest contender is {best / out['floor_s']:.2f}x it" if best else ""
        print(f"floor: no plan over auto's layouts takes less than {out['floor_s']:.2f}s{beside}")
    for notice in out["notices"]:
        print(f"notice: {notice}")


def run(args) -> int:
    from hotswitch.backend.sim.floor import plan_floor
    from hotswitch.backend.sim.paper.compare import compare
    from hotswitch.backend.sim.scenario import Setup, sim_model

    _check(args)
    plan = parse_plan(args.plan) if args.plan else None
    lengths, origin = _lengths(args)
    setup = Setup(
        sim_model(args.model, args.context),
        args.gpus,
        args.context,
        lengths,
        args.device,
        planned_switches=args.switches == "planned",
        latency_aware=args.context_parallel,
        packing=args.packing,
    )
    for strategy in plan.strategies if plan else ():
        setup.check(strategy)  # a plan the cluster cannot hold is refused before any contender runs
    contenders = _contenders(args)
    comparison = compare(
        setup, args.model.lower(), plan, contenders, _progress, args.context_parallel, args.side_by_side
    )
    out = {"data": origin, **report(comparison, plan_floor(setup.weighing(args.context_parallel, args.side_by_side)))}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print_table(out)
    return 0
