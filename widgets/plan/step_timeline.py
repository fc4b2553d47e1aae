"""A trained step on a device timeline: each stage of the plan in order, device groups side by
side on their own ranks, from the ``plan`` event in force and the ``step`` event's measured
seconds. Drawn like a simulated step (``sim_timeline``): ranks down, seconds across.

Each stage starts when the previous one's slowest strategy ends; a strategy's bar is its
measured compute seconds on its ranks (a strategy over every device on all of them), the idle
rest of the stage left blank. The step's switches, gradient syncs and update are measured as
totals, not per stage, so they are drawn as totals after the last stage, on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.strategy import Strategy
from hotswitch.widgets.figure_widget import FigureWidget
from hotswitch.widgets.simulation.timeline import timeline_figure

STAGE_JOIN = " + "  # how the plan event writes strategies side by side in one stage
TOTALS = (("switch", "switch"), ("grad_sync", "sync"), ("update", "update"))  # step seconds -> timeline kind


@dataclass(frozen=True)
class Bar:
    rank: int
    start: float
    end: float
    kind: str
    strategy: str


@dataclass(frozen=True)
class MeasuredStep:
    """What ``sim_timeline.timeline_figure`` draws: bars per rank, the step's seconds, the order."""

    seconds: float
    order: tuple[str, ...]
    segments: tuple[Bar, ...]


def measured_step(plan: dict, step: dict, world: int) -> MeasuredStep:
    """``step`` (a ``step`` event) laid out by ``plan`` (the ``plan`` event in force) on ``world`` ranks."""
    bars: list[Bar] = []
    clock = 0.0
    names = []
    for stage in plan["order"]:
        longest = 0.0
        for name in stage.split(STAGE_JOIN):
            share = step["strategies"].get(name)
            if share is None:  # no sequences this step (the instantiation strategy always runs)
                continue
            ranks = Strategy.parse(name).ranks if "@" in name else range(world)
            bars += [Bar(r, clock, clock + share["seconds"], "compute", name) for r in ranks]
            longest = max(longest, share["seconds"])
            names.append(name)
        clock += longest
    for key, kind in TOTALS:
        seconds = step["seconds"][key]
        if seconds > 0:
            bars += [Bar(r, clock, clock + seconds, kind, "") for r in range(world)]
            clock += seconds
    return MeasuredStep(clock, tuple(names), tuple(bars))


def step_timeline(plan: dict, step: dict, world: int) -> FigureWidget:
    """The figure of ``measured_step``, titled with the step's number and measured seconds."""
    laid = measured_step(plan, step, world)
    return timeline_figure(laid, title=f"step {step['step']}: {laid.seconds:.3f} s measured, stages in order")
