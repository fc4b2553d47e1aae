"""Rank functions for the gloo switch tests (importable by spawned processes)."""

import hashlib

import torch

from hotswitch.backend import Cluster, Strategy, get_config, param_layout
from hotswitch.backend.layout import partial_over_replicas
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.switch import SwitchPlanner, plan_switch
from hotswitch.backend.switch.executor import BoundSwitch


def global_tensors(config, seed: int, integers: bool = False) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in config.param_shapes().items():
        out[name] = (
            torch.randint(-50, 50, shape, generator=gen).float() if integers else torch.randn(shape, generator=gen)
        )
    return out


def mismatches(buffer: FlatBuffer, expected: dict[str, torch.Tensor], label: str) -> list[str]:
    out = []
    for name, box in buffer.boxes.items():
        want = expected[name][box.slices()]
        if not torch.equal(buffer.views[name], want):
            out.append(f"{label}: {name} differs on rank {buffer.rank}")
    return out


def plan_digest(plan) -> str:
    return hashlib.sha256(repr((plan.transfers, sorted(plan.zero_first))).encode()).hexdigest()


def switch_every_pair(rank: int, world: int, model: str, strategies: list[str], nodes: int, algorithm: str):
    """Switch between every ordered pair and back; returns (mismatches, plan digests)."""
    config = get_config(model)
    cluster = Cluster.local(world, nodes=nodes)
    planner = SwitchPlanner(config, cluster, algorithm)
    truth = global_tensors(config, seed=1)
    buffers = {s: FlatBuffer(param_layout(config, Strategy.parse(s)), rank) for s in strategies}
    bad, digests = [], []
    for a in strategies:
        for b in strategies:
            if a == b:
                continue
            buffers[a].load_global(truth)
            buffers[b].flat.fill_(float("nan"))
            BoundSwitch(planner.plan(a, b), rank, buffers[a], buffers[b]).run()
            bad += mismatches(buffers[b], truth, f"{a}->{b}")
            buffers[a].flat.fill_(float("nan"))
            BoundSwitch(planner.plan(b, a), rank, buffers[b], buffers[a]).run()
            bad += mismatches(buffers[a], truth, f"{a}->{b}->{a}")
            digests.append(plan_digest(planner.plan(a, b)))
    return bad, digests


def switch_gradients(rank: int, world: int, model: str, src: str, dst: str, nodes: int):
    """Unreduced gradients (Partial over src's dp) -> dst's dp-Partial layout (the sum on
    dp replica 0, zeros on the others) and -> dst replicated; returns mismatches."""
    config = get_config(model)
    cluster = Cluster.local(world, nodes=nodes)
    src_layout = partial_over_replicas(param_layout(config, Strategy.parse(src)))
    replicated = param_layout(config, Strategy.parse(dst))
    partial = partial_over_replicas(replicated)
    dp = Strategy.parse(src).dp
    summands = [global_tensors(config, seed=10 + i, integers=True) for i in range(dp)]
    total = {name: sum(s[name] for s in summands) for name in summands[0]}
    grads = FlatBuffer(src_layout, rank)
    for name, box in grads.boxes.items():
        index = src_layout[name].state.partial_index(rank)
        grads.views[name].copy_(summands[index][name][box.slices()])
    bad = []
    for label, layout in (("replicated", replicated), ("partial", partial)):
        out = FlatBuffer(layout, rank)
        out.flat.fill_(float("nan"))
        plan = plan_switch(src_layout, layout, cluster)
        BoundSwitch(plan, rank, grads, out).run()
        for name, box in out.boxes.items():
            first = layout[name].state.partial_index(rank) == 0
            want = total[name][box.slices()]
            if not torch.equal(out.views[name], want if first else torch.zeros_like(want)):
                bad.append(f"{src}->{dst} {label}: {name} on rank {rank}")
    return bad
