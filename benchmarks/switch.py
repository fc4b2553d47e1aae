"""A hot switch measured on real gloo ranks against what the same move costs otherwise.

For each pair of strategies (``pairs``: ``src``, ``dst``, ``bytes`` moved), on ``--ranks`` local
processes and a LLaMA-shaped model of ``--layers`` layers (77M parameters by default, fp32):

- ``switch_s``: our plan (balanced planner, fused messages, one batch_isend_irecv round);
- ``bound_s``: one plain ``all_to_all_single`` moving exactly the same bytes between
  the same rank pairs, each rank's own share included (what the transport does with
  contiguous buffers and no packing at all);
- ``naive_s``: the naive plan (first owner, one message per slice);
- ``dcp_s``: what users do today: save the parameters with torch.distributed.checkpoint
  as DTensors of the source layout and load them into DTensors of the destination
  layout (resharding on load), without the process restart users also pay; the
  checkpoint lives in shared memory unless ``--ckpt-dir`` says otherwise.

Every figure is the median over ``--repeat`` runs (after a warm-up), each the slowest rank's time.
The destination is checked element by element after every method (``exact``). Beside the pairs:
``model_params``, ``ranks`` and where the checkpoint lived (``checkpoint_dir``). The ``summary``
gives the worst ratios (``max_switch_over_bound``, ``min_dcp_over_switch``,
``min_naive_over_switch``) and ``all_exact``. ``--smoke``: 2 ranks, the tiny model, three pairs,
one repeat (the output's ``smoke``).

    python -m benchmarks.switch --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

from benchmarks.common.promised import check_promised
from hotswitch.backend import Cluster, Strategy, get_config, param_layout
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.switch import SwitchPlanner
from hotswitch.backend.switch.executor import BoundSwitch
from hotswitch.backend.train.state.checkpoint import as_dtensor, stage_meshes

PAIRS = [
    ("tp2pp2", "dp4"),
    ("dp4", "dp2tp2"),
    ("dp2tp2", "tp2pp2"),
    ("dp4", "tp4"),
    ("tp4", "pp4"),
    ("dp2pp2", "dp2tp2"),
]
SMOKE_PAIRS = [("tp2", "dp2"), ("pp2", "cp2"), ("cp2", "tp2")]  # 2 ranks; a cp mesh dim sends and receives
SMOKE = dict(model="tiny", ranks=2, layers=2, repeat=1)
OUTPUT_KEYS = (
    "model_params",
    "ranks",
    "checkpoint_dir",
    "pairs[].bytes",
    "pairs[].switch_s",
    "pairs[].bound_s",
    "pairs[].naive_s",
    "pairs[].dcp_s",
    "pairs[].exact",
    "summary.max_switch_over_bound",
    "summary.min_dcp_over_switch",
    "summary.min_naive_over_switch",
    "summary.all_exact",
)


def timed(fn, repeat: int) -> float:
    """Median over runs of the slowest rank's wall time, after one untimed warm-up run
    (first touches of fresh buffers, connection set-up)."""
    fn()
    times = []
    for _ in range(repeat):
        dist.barrier()
        started = time.perf_counter()
        fn()
        elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        times.append(elapsed.item())
    return statistics.median(times)


def all_to_all_same_volumes(plan, rank: int, world: int):
    """An all_to_all_single whose per-peer splits are the plan's per-peer volumes,
    the rank's own split being what it keeps (a reshard must place that too)."""
    send, recv = [0] * world, [0] * world
    for t in plan.transfers:
        if t.sender == rank:
            send[t.receiver] += t.box.numel
        if t.receiver == rank:
            recv[t.sender] += t.box.numel
    out, inp = torch.empty(sum(recv)), torch.empty(sum(send))
    return lambda: dist.all_to_all_single(out, inp, recv, send)


class DTensorLayouts:
    """DTensor views of a rank's flat buffers, on the (dp, cp, tp) mesh of each pipeline stage
    that the trainer's checkpoints use."""

    def __init__(self, config, strategies: list[Strategy]):
        self.config = config
        self.meshes = {}
        for s in strategies:  # every rank builds every mesh: creating its groups is collective
            for stage, mesh in enumerate(stage_meshes(s, "cpu")):
                self.meshes[s, stage] = mesh

    def state_dict(self, strategy: Strategy, buffer: FlatBuffer) -> dict:
        layout = param_layout(self.config, strategy)
        return {
            name: as_dtensor(view, self.meshes[strategy, layout[name].stage], layout[name])
            for name, view in buffer.views.items()
        }


def bench_rank(rank: int, world: int, config, pairs: list[tuple[str, str]], repeat: int, ckpt_root: str):
    import torch.distributed.checkpoint as dcp

    torch.set_num_threads(1)
    cluster = Cluster.local(world)
    planner, naive = SwitchPlanner(config, cluster), SwitchPlanner(config, cluster, "naive")
    strategies = sorted({Strategy.parse(s) for pair in pairs for s in pair}, key=str)
    buffers = {s: FlatBuffer(param_layout(config, s), rank) for s in strategies}
    gen = torch.Generator().manual_seed(0)
    truth = {name: torch.randn(shape, generator=gen) for name, shape in config.param_shapes().items()}
    dtensors = DTensorLayouts(config, strategies)

    def exact(buffer: FlatBuffer) -> bool:
        ok = all(torch.equal(v, truth[n][buffer.boxes[n].slices()]) for n, v in buffer.views.items())
        flag = torch.tensor([int(ok)])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        return bool(flag.item())

    results = []
    for src_name, dst_name in pairs:
        src, dst = Strategy.parse(src_name), Strategy.parse(dst_name)
        buffers[src].load_global(truth)
        plan = planner.plan(src, dst)
        checks = {}
        row = {"src": str(src), "dst": str(dst), "bytes": plan.bytes_moved}
        for key, p in (("switch_s", plan), ("naive_s", naive.plan(src, dst))):
            bound = BoundSwitch(p, rank, buffers[src], buffers[dst])
            buffers[dst].flat.zero_()
            row[key] = timed(bound.run, repeat)
            checks[key] = exact(buffers[dst])
        row["bound_s"] = timed(all_to_all_same_volumes(plan, rank, world), repeat)

        def checkpoint_reshard(src=src, dst=dst):
            path = tempfile.mkdtemp(dir=ckpt_root) if rank == 0 else None
            shared = [path]
            dist.broadcast_object_list(shared, src=0)
            dcp.save(dtensors.state_dict(src, buffers[src]), checkpoint_id=shared[0])
            dcp.load(dtensors.state_dict(dst, buffers[dst]), checkpoint_id=shared[0])
            dist.barrier()
            if rank == 0:
                shutil.rmtree(shared[0])

        buffers[dst].flat.zero_()
        row["dcp_s"] = timed(checkpoint_reshard, repeat)
        checks["dcp_s"] = exact(buffers[dst])
        row["exact"] = all(checks.values())
        results.append(row)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--model", default="125m", help="the preset whose shape the model takes")
    parser.add_argument("--layers", type=int, default=4, help="transformer layers of the 125M shape (4: 77M params)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--ckpt-dir", default=None, help="where the checkpoint baseline writes (default: shared memory, its best case)"
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny run in seconds: " + str(SMOKE))
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(SMOKE)
    config = get_config(args.model).with_(name=f"llama-{args.layers}l", n_layers=args.layers)
    pairs = SMOKE_PAIRS if args.smoke else PAIRS
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=args.ckpt_dir or shm) as root:
        pairs = spawn_ranks(bench_rank, args.ranks, config, pairs, args.repeat, root, timeout=3600)[0]
    for row in pairs:
        row["switch_over_bound"] = row["switch_s"] / row["bound_s"]
        row["dcp_over_switch"] = row["dcp_s"] / row["switch_s"]
    out = {
        "model_params": config.n_params,
        "ranks": args.ranks,
        "dtype": "float32",
        "checkpoint_dir": "shared memory" if args.ckpt_dir is None and shm else "disk",
        "pairs": pairs,
        **({"smoke": {**SMOKE, "pairs": SMOKE_PAIRS}} if args.smoke else {}),
        "summary": {
            "max_switch_over_bound": max(r["switch_over_bound"] for r in pairs),
            "min_dcp_over_switch": min(r["dcp_over_switch"] for r in pairs),
            "min_naive_over_switch": min(r["naive_s"] / r["switch_s"] for r in pairs),
            "all_exact": all(r["exact"] for r in pairs),
        },
    }
    if not args.json:
        for r in pairs:
            print(
                f"{r['src']:>10} -> {r['dst']:<10} {r['bytes'] / 1e6:8.1f} MB  switch {r['switch_s'] * 1e3:7.1f} ms"
                f"  bound {r['bound_s'] * 1e3:7.1f} ms  naive {r['naive_s'] * 1e3:7.1f} ms"
                f"  dcp {r['dcp_s'] * 1e3:8.1f} ms"
            )
    print(json.dumps(out, indent=1))
    check_promised(out, OUTPUT_KEYS)


if __name__ == "__main__":
    main()
