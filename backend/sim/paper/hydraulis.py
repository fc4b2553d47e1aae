"""Hydraulis' experiment beside ours, as far as its public code gives it.

Hydraulis (arXiv 2412.07894, the HotSPa authors' group) trains strategies that differ across
data-parallel replicas and packs documents in two stages; it reports 1.32-2.66x over existing
systems. Its code (``github.com/lhy101/Hydraulis``, branch ``main``, commit ``4489487``, read on
2026-11-28) says how its paper's runs were launched: ``examples/paper_exp/train_CommonCrawl.sh``
(the 32B shape on 64 GPUs, batches of 200,000 tokens, documents up to 32K) and
``examples/paper_exp/train_GitHub.sh`` (13B on 32 GPUs, 100,000 tokens, up to 16K); A800s of
80 GB (``env_A800.sh``, the scheme space's memory bound); the LLaMA shapes of
``sim.paper.setups``; a batch fixed in tokens, the last document cut to fill it
(``LLaMAFixedTokenSampler``). Not in that code: its baselines and how they were run, the figures
per setting, its GitHub lengths. So beside ours stand the HotSPa paper's baselines as its
authors ran them (``sim.paper.baselines``), with GitHub's lengths our assumption
(``sim.datasets``), and Hydraulis' own range only as reported.

Hydraulis packs documents, so our contenders pack too (``Setup.packing``). Per setting: the
strong static, ``auto``, ``auto`` with the cp layouts, ``auto`` with device groups, the floor
under every plan (``sim.floor``) and the paper's baselines, all on the same batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.sim.contenders import Contender
from hotswitch.backend.sim.datasets import batch_of_tokens
from hotswitch.backend.sim.floor import plan_floor
from hotswitch.backend.sim.paper.compare import compare
from hotswitch.backend.sim.paper.grid import speedup
from hotswitch.backend.sim.scenario import Setup

SOURCE = "github.com/lhy101/Hydraulis, branch main, commit 4489487"
REPORTED = (1.32, 2.66)  # the abstract's "outperforms existing systems by 1.32-2.66x"; nothing reads it


@dataclass(frozen=True)
class HydraulisSetting:
    model: str
    gpus: int
    dataset: str
    context: int
    tokens: int  # per global batch
    script: str  # where the code launches it


SETTINGS = (
    HydraulisSetting("32b", 64, "commoncrawl", 32768, 200_000, "examples/paper_exp/train_CommonCrawl.sh"),
    HydraulisSetting("13b", 32, "github", 16384, 100_000, "examples/paper_exp/train_GitHub.sh"),
)


def _seconds(c: Contender | None) -> float | None:
    return c.step_s if c is not None else None


def hydraulis_row(setting: HydraulisSetting, device: str = "A800", seed: int = 0) -> dict:
    """Every contender of one Hydraulis setting on one batch, and ours against the others: the
    best of our ``auto`` arms (sequential, with cp, with device groups) over each."""
    lengths = batch_of_tokens(setting.dataset, setting.context, setting.tokens, seed)
    setup = Setup(setting.model, setting.gpus, setting.context, lengths, device=device, packing=True)
    c = compare(setup, model_name=setting.model, context_parallel=True, side_by_side=True)
    arms = {"auto": c.auto, "auto+cp": c.auto_cp, "auto+groups": c.auto_groups}
    ran = {name: arm.step_s for name, arm in arms.items() if arm is not None and arm.step_s is not None}
    best = min(ran, key=ran.__getitem__) if ran else None
    ours = ran[best] if best else None
    floor = plan_floor(setup.weighing(context_parallel=True, side_by_side=True))
    paper = {name.replace("-", "_").replace("+", "_"): _seconds(x) for name, x in c.paper.items()}
    megatron = c.megatron_paper
    return {
        **setting.__dict__,
        "documents": len(lengths),
        "longest": max(lengths),
        "best_static": str(c.best_static.plan) if c.best_static else None,
        "best_static_s": _seconds(c.best_static),
        **{f"{name.replace('+', '_')}_s": _seconds(arm) for name, arm in arms.items()},
        **{f"{name.replace('+', '_')}_plan": str(arm.plan) if arm and arm.plan else None for name, arm in arms.items()},
        "ours": best,
        "ours_s": ours,
        "floor_s": floor,
        **{f"{name}_s": seconds for name, seconds in paper.items()},
        "vs_strong_static": speedup(_seconds(c.best_static), ours),
        "vs_megatron_paper": speedup(_seconds(megatron), ours),
        "vs_deepspeed_paper": speedup(paper.get("deepspeed_paper"), ours),
        "vs_hetu_static_paper": speedup(paper.get("hetu_static_paper"), ours),
        "floor_vs_static": speedup(_seconds(c.best_static), floor),
    }


def hydraulis_grid(settings=SETTINGS, device: str = "A800", seed: int = 0) -> list[dict]:
    return [hydraulis_row(s, device, seed) for s in settings]
