"""Every model family that loads, measured against transformers' own class for it, in one run.

Each family is built by transformers' own classes with random weights (the family tests'
builders, ``tests/backend/models/families.py``: the layout each family's published
``config.json`` sets, options shrunk to the shape), saved with ``save_pretrained`` and read by
the engine's loader (``config_from_hf``, what ``--model hf:DIR`` calls). Per family
(``families[]``):

- ``family`` (the builder's name), ``model_type``, ``loads`` (true, or the loader's refusal),
  ``options`` (the options the loaded config sets: what differs from a plain LLaMA);
- ``forward_rel_diff``: the engine's summed loss against transformers' on the same tokens,
  relative, fp32, unpacked rows;
- ``hot_switched_rel_diff``: the largest relative difference, over the steps, between the loss
  the engine trains to on ``world`` gloo ranks under a hot-switched plan (``plan``: tp2pp2,
  dp2tp2sp, cp2tp2 and dp4, Ulysses' ul2tp2 in place of ring attention's cp2tp2 for the sliding-window
  families) and the one-device
  reference on the same batches; ``hot_switched_grad_rel_diff``: the largest relative norm
  difference of a parameter's step-1 gradient;
- ``engine_step_s``, ``transformers_step_s``: CPU seconds of one training step (forward,
  backward, clipping, AdamW) on the same batch from the same weights, in one process, the
  median of the timed steps; ``transformers_over_engine`` (above 1: the engine is faster).

``plain_llama`` answers whether the options cost a model that sets none of them: the same plain
LLaMA step timed on this tree (``engine_step_s``) and, with ``--baseline REV``, on the tree at
git revision ``REV`` (``baseline_step_s``: in a subprocess, from a temporary worktree; null
without one), with ``baseline`` (the revision) and ``baseline_over_engine``. Top level:
``device``, ``torch``, ``transformers``, ``shape`` (the families' size), ``world``, ``smoke``
and ``elapsed_s``. ``--smoke``: two families at the tests' size, two ranks; progress on stderr.

    python -m benchmarks.families --json --baseline e77be36~1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import MISSING, fields
from pathlib import Path

import torch

from benchmarks.common.peer_sides import EngineSide, TransformersSide, measure
from benchmarks.common.promised import check_promised
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf import config_from_hf, load_pretrained
from hotswitch.backend.precision import FP32
from hotswitch.backend.runtime.spawn import spawn_ranks

# the family builders live with the tests (the repository root is on the path under ``-m``)
from tests.backend.models.families import FAMILIES, SHAPE, SLIDING, make_family
from tests.backend.models.family_workers import family_runs, reference

ROOT = Path(__file__).resolve().parents[1]  # this tree: its plain LLaMA step, and git's worktrees of a baseline

OUTPUT_KEYS = (
    "families[].family",
    "families[].model_type",
    "families[].loads",
    "families[].options",
    "families[].forward_rel_diff",
    "families[].hot_switched_rel_diff",
    "families[].hot_switched_grad_rel_diff",
    "families[].plan",
    "families[].engine_step_s",
    "families[].transformers_step_s",
    "families[].transformers_over_engine",
    "plain_llama.engine_step_s",
    "plain_llama.baseline_step_s",
    "plain_llama.baseline",
    "plain_llama.baseline_over_engine",
    "device",
    "torch",
    "transformers",
    "shape",
    "world",
    "smoke",
    "elapsed_s",
)
# the timed size: big enough that a step is more than Python's overhead, small enough for CI's CPUs
TIMED_SHAPE = {"hidden_size": 256, "intermediate_size": 704, "num_attention_heads": 8, "num_key_value_heads": 4}
MIXED = [("tp2pp2", 30), ("dp2tp2sp", 16), ("cp2tp2", 10), ("dp4", 0)]
ULYSSES = [("ul2tp2", 20), ("dp2tp2sp", 12), ("tp2pp2", 8), ("dp4", 0)]  # Ulysses gets the long: the window acts
SMOKE_PLAN = [("tp2", 16), ("dp2", 0)]
ROWS, SEQ = 4, 64


def note(text: str) -> None:
    print(f"[families] {text}", file=sys.stderr, flush=True)


def options_set(config: ModelConfig) -> dict:
    """The options of ``config`` that differ from a plain LLaMA's defaults."""
    shape = ("name", "family", "vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "max_seq_len")
    shape += ("norm_eps", "rope_theta")
    defaults = {f.name: f.default if f.default_factory is MISSING else f.default_factory() for f in fields(config)}
    out = {n: getattr(config, n) for n in defaults if n not in shape and getattr(config, n) != defaults[n]}
    return json.loads(json.dumps(out, default=vars))


def batch_of(vocab: int, seed: int) -> list[Sequence]:
    generator = torch.Generator().manual_seed(seed)
    return [Sequence(i, tuple(torch.randint(0, vocab, (SEQ + 1,), generator=generator).tolist())) for i in range(ROWS)]


def forward_diff(directory: Path, reference_model) -> float:
    ours = load_pretrained(directory)
    tokens = torch.tensor([s.tokens for s in batch_of(ours.config.vocab_size, 1)])
    with torch.no_grad():
        expected = reference_model(input_ids=tokens, labels=tokens).loss.item() * tokens[:, 1:].numel()
        got = ours(tokens[:, :-1], tokens[:, 1:]).item()
    return abs(got - expected) / abs(expected)


def step_times(config: ModelConfig, directory: Path, timed: int) -> tuple[float, float]:
    """Seconds a step, the engine's and transformers', from the checkpoint's weights."""
    batches = [batch_of(config.vocab_size, 2)]
    cpu = torch.device("cpu")
    engine = EngineSide(config, cpu, FP32, checkpoint=directory)
    engine.use_budget(ROWS * SEQ)
    ours = measure(engine.step, batches, warmups=1, timed=timed, cuda=False)
    peer = TransformersSide(config, cpu, mixed=False, compiled=False, same_weights=False, checkpoint=directory)
    peer.use_budget(ROWS * SEQ)
    theirs = measure(peer.step, batches, warmups=1, timed=timed, cuda=False)
    assert isinstance(ours.step_s, float) and isinstance(theirs.step_s, float)  # no device to run out of
    return ours.step_s, theirs.step_s


def hot_switched(configs: dict[str, ModelConfig], world: int, smoke: bool) -> dict[str, dict]:
    """Per family: the plan, and the hot-switched run's loss and gradient differences."""
    plans = {n: SMOKE_PLAN if smoke else ULYSSES if n in SLIDING else MIXED for n in configs}
    note(f"hot-switched training of {len(configs)} families on {world} gloo ranks")
    runs = spawn_ranks(family_runs, world, configs, plans, timeout=3600)[0]
    out = {}
    for name, config in configs.items():
        losses, grads, _, _ = runs[name]
        ref_losses, ref_grads, _ = reference(config)
        loss_diff = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_losses, strict=True))
        grad_diff = max(((grads[t] - r).norm() / r.norm()).item() for t, r in ref_grads.items())
        out[name] = {"plan": " | ".join(s for s, _ in plans[name]), "loss": loss_diff, "grad": grad_diff}
    return out


# one plain LLaMA step timed in a process of its own, on whichever tree ``hotswitch`` resolves to
PLAIN_STEP = """
import json, statistics, sys, time
import torch
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.state.optim import OptimizerConfig
rows, seq, timed = (int(a) for a in sys.argv[1:4])
torch.set_num_threads(1)
torch.distributed.init_process_group("gloo", init_method="file://" + sys.argv[4], rank=0, world_size=1)
config = ModelConfig("plain", vocab_size=2048, dim=256, n_layers=4, n_heads=8, n_kv_heads=4, ffn_dim=704,
                     max_seq_len=seq + 1)
single = Strategy()
engine = Engine(config, [single], single, engine_run(rows * (seq + 1), seed=0))
g = torch.Generator().manual_seed(2)
batch = [Sequence(i, tuple(torch.randint(0, 2048, (seq + 1,), generator=g).tolist())) for i in range(rows)]
engine.step({single: batch}, [single])
seconds = []
for _ in range(timed):
    started = time.perf_counter()
    engine.step({single: batch}, [single])
    seconds.append(time.perf_counter() - started)
print(json.dumps(statistics.median(seconds)))
"""


def plain_step_s(tree: Path, timed: int) -> float:
    """The plain LLaMA step on the tree at ``tree``: ``hotswitch`` imported from it through a
    folder of links put first on the path (ahead of the installed, editable package)."""
    with tempfile.TemporaryDirectory(prefix="hotswitch-tree-") as shim:
        package = Path(shim) / "hotswitch"
        package.mkdir()
        (package / "__init__.py").write_text("")
        for part in ("backend", "widgets", "kernel"):
            (package / part).symlink_to(tree / part)
        code = f"import sys; sys.path.insert(0, {shim!r}); exec(compile({PLAIN_STEP!r}, 'plain', 'exec'))"
        args = [sys.executable, "-c", code, str(ROWS), str(SEQ), str(timed), str(Path(shim) / "store")]
        done = subprocess.run(args, capture_output=True, text=True, cwd=shim)
        if done.returncode:
            raise SystemExit(f"the plain LLaMA step failed on {tree}:\n{done.stderr}")
        return json.loads(done.stdout.splitlines()[-1])


def plain_llama(baseline: str | None, timed: int) -> dict:
    """The plain LLaMA step on this tree and, side by side, on the baseline revision's."""
    note("the plain LLaMA step on this tree")
    ours = plain_step_s(ROOT, timed)
    before = None
    if baseline is not None:
        with tempfile.TemporaryDirectory(prefix="hotswitch-baseline-") as folder:
            tree = Path(folder) / "tree"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), baseline],
                check=True,
                stdout=sys.stderr,
            )
            try:
                note(f"the plain LLaMA step at {baseline}")
                before = plain_step_s(tree, timed)
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True, stdout=sys.stderr
                )
    ratio = None if before is None else before / ours
    return {"engine_step_s": ours, "baseline_step_s": before, "baseline": baseline, "baseline_over_engine": ratio}


def family_row(name: str, folder: Path, timed_shape: dict, timed: int) -> tuple[dict, ModelConfig | None]:
    """One family's loader result, forward difference and step times; its tiny config for the
    hot-switched run (None where it does not load)."""
    note(f"{name}: build, load, forward, time")
    reference_model = make_family(folder / name, name, **timed_shape)
    model_type = json.loads((folder / name / "config.json").read_text())["model_type"]
    row: dict = {"family": name, "model_type": model_type}
    try:
        config = config_from_hf(folder / name)
    except ValueError as refused:
        return {**row, "loads": str(refused), "options": None}, None
    row.update(loads=True, options=options_set(config), forward_rel_diff=forward_diff(folder / name, reference_model))
    engine_s, peer_s = step_times(config, folder / name, timed)
    row.update(engine_step_s=engine_s, transformers_step_s=peer_s, transformers_over_engine=peer_s / engine_s)
    make_family(folder / f"{name}-tiny", name)  # the tests' size, for the hot-switched run
    return row, config_from_hf(folder / f"{name}-tiny")


def measure_families(rank: int, world: int, names: list[str], timed_shape: dict, timed: int):
    """On one rank of its own (the engine trains in a process group): every family's row, and
    the tiny configs of those that load."""
    torch.set_num_threads(1)  # both sides on one thread: the comparison is of the work, not the cores
    rows, tiny = [], {}
    with tempfile.TemporaryDirectory(prefix="hotswitch-families-") as folder:
        for name in names:
            row, config = family_row(name, Path(folder), timed_shape, timed)
            rows.append(row)
            if config is not None:
                tiny[name] = config
    return rows, tiny


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="two families at the tests' size, two ranks")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (else a summary)")
    parser.add_argument("--baseline", metavar="REV", help="also time the plain LLaMA step at git revision REV")
    parser.add_argument("--timed", type=int, default=5, help="timed steps per side (default 5)")
    args = parser.parse_args()
    started = time.perf_counter()
    names = ["tinyllama", "qwen3"] if args.smoke else list(FAMILIES)
    timed_shape = {} if args.smoke else TIMED_SHAPE
    timed = 2 if args.smoke else args.timed
    world = 2 if args.smoke else 4
    rows, tiny = spawn_ranks(measure_families, 1, names, timed_shape, timed, timeout=3600)[0]
    for name, result in hot_switched(tiny, world, args.smoke).items():
        row = next(r for r in rows if r["family"] == name)
        row.update(plan=result["plan"], hot_switched_rel_diff=result["loss"], hot_switched_grad_rel_diff=result["grad"])
    import transformers

    out = {
        "families": rows,
        "plain_llama": plain_llama(args.baseline, timed),
        "device": "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "shape": {**SHAPE, **timed_shape, "rows": ROWS, "tokens": SEQ},
        "world": world,
        "smoke": args.smoke,
        "elapsed_s": time.perf_counter() - started,
    }
    print(json.dumps(out, indent=1) if args.json else summary(out))
    check_promised(out, OUTPUT_KEYS)


def summary(out: dict) -> str:
    lines = [f"{'family':10} {'loads':5} {'forward':>8} {'switched':>8} {'engine s':>9} {'hf s':>8} {'hf/eng':>6}"]
    for r in out["families"]:
        if r["loads"] is not True:
            lines.append(f"{r['family']:10} no: {r['loads']}")
            continue
        lines.append(
            f"{r['family']:10} {'yes':5} {r['forward_rel_diff']:8.1e} {r['hot_switched_rel_diff']:8.1e} "
            f"{r['engine_step_s']:9.4f} {r['transformers_step_s']:8.4f} {r['transformers_over_engine']:6.2f}"
        )
    plain = out["plain_llama"]
    lines.append(f"plain LLaMA step {plain['engine_step_s']:.4f} s; at {plain['baseline']}: {plain['baseline_step_s']}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
