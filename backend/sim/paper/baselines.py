"""The paper's own baselines as named contenders, each through the simulator's cost model:

- ``megatron-paper`` (and ``megatron-paper+recompute``): the authors' Megatron-LM runs
  (``sim.paper.megatron``), the paper's layouts and the MBS sweep, the fastest kept;
- ``hetu-static-paper``: HotSPa's artifact run statically, documents in context-length rows with
  dense in-row attention (``sim.paper.rows``), the fastest of the paper's static layouts;
- ``hotspa-c1-paper``: the artifact's hot switching, the paper's c1 plan on 4K/16K/32K rows;
- ``deepspeed-paper``: ZeRO-1/2/3 with Ulysses (``sim.paper.deepspeed``).

Beside them stay the engine's packed statics (``best_static``: the strongest baseline a user can
run, HotSPa-grade data handling, the headline yardstick) and ``auto``.
"""

from __future__ import annotations

from dataclasses import replace

from hotswitch.backend.sim.contenders import Contender, run_plan, step_seconds
from hotswitch.backend.sim.paper import setups
from hotswitch.backend.sim.paper.deepspeed import deepspeed_sweep
from hotswitch.backend.sim.paper.megatron import megatron_sweep
from hotswitch.backend.sim.paper.rows import bucketed_rows, context_rows
from hotswitch.backend.sim.scenario import Setup
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan

PAPER_CONTENDERS = (
    "megatron-paper",
    "megatron-paper+recompute",
    "hetu-static-paper",
    "hotspa-c1-paper",
    "deepspeed-paper",
)


def _layouts(setup: Setup, model_name: str | None) -> list[Strategy]:
    from hotswitch.backend.sim.paper.compare import static_strategies  # compare imports this module

    return static_strategies(setup, model_name)


def megatron_paper(setup: Setup, model_name: str | None = None, recompute: bool = False) -> Contender:
    name = "megatron-paper+recompute" if recompute else "megatron-paper"
    c = setup
    try:
        run = megatron_sweep(
            c.config, c.cluster, c.spec, c.precision, _layouts(setup, model_name), c.lengths, c.context, recompute
        )
    except ValueError as error:
        return Contender(name, None, None, None, {}, str(error))
    memory = {str(run.strategy): run.memory_bytes}
    return Contender(name, None, run.strategy, None, memory, seconds=run.step_s, detail=f"{run.strategy} mbs{run.mbs}")


def with_rows(setup: Setup, rows: list[int]) -> Setup:
    """``setup`` on a batch of padded rows instead of documents (the strategy costs shared)."""
    out = replace(setup, lengths=rows)
    out.costs = setup.costs
    return out


def hetu_static_paper(setup: Setup, model_name: str | None = None) -> Contender:
    from hotswitch.backend.sim.paper.compare import checkpointed_where_needed

    rows = with_rows(setup, context_rows(setup.lengths, setup.context))
    runs = [
        run_plan(rows, checkpointed_where_needed(rows, HotSwitchPlan.of(s)), "hetu-static-paper")
        for s in _layouts(setup, model_name)
    ]
    fitting = [r for r in runs if r.step is not None]
    if not fitting:
        return Contender("hetu-static-paper", None, None, None, {}, runs[0].why if runs else "no static layout")
    return min(fitting, key=step_seconds)


def hotspa_c1_paper(setup: Setup, model_name: str | None = None) -> Contender | None:
    """None where the paper gives no c1 for this (model, GPUs)."""
    from hotswitch.backend.sim.paper.compare import checkpointed_where_needed

    picked = setups.hand_picked(model_name or setup.config.name, setup.cluster.world_size, "c1")
    if picked is None:
        return None
    rows = with_rows(setup, bucketed_rows(setup.lengths, setup.context))
    return run_plan(rows, checkpointed_where_needed(rows, picked), "hotspa-c1-paper")


def deepspeed_paper(setup: Setup) -> Contender:
    try:
        run = deepspeed_sweep(setup, len(context_rows(setup.lengths, setup.context)))
    except ValueError as error:
        return Contender("deepspeed-paper", None, None, None, {}, str(error))
    return Contender(
        "deepspeed-paper", None, None, None, {str(run): run.memory_bytes}, seconds=run.step_s, detail=str(run)
    )


def paper_contenders(setup: Setup, model_name: str | None = None, names=PAPER_CONTENDERS) -> dict[str, Contender]:
    """The named baselines of ``setup`` (refusing an unknown name before any runs)."""
    unknown = [n for n in names if n not in PAPER_CONTENDERS]
    if unknown:
        raise ValueError(f"unknown contender {unknown[0]!r}; choose from {', '.join(PAPER_CONTENDERS)}")
    build = {
        "megatron-paper": lambda: megatron_paper(setup, model_name),
        "megatron-paper+recompute": lambda: megatron_paper(setup, model_name, recompute=True),
        "hetu-static-paper": lambda: hetu_static_paper(setup, model_name),
        "hotspa-c1-paper": lambda: hotspa_c1_paper(setup, model_name),
        "deepspeed-paper": lambda: deepspeed_paper(setup),
    }
    out = {name: build[name]() for name in names}
    return {name: c for name, c in out.items() if c is not None}
