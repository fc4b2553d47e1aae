"""The parallelism and plan section of a run configuration: the hot-switch plan, what ``auto``
weighs, the distributed optimizer, and the device kind every rank computes on."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hotswitch.backend.runtime.devices import DEVICE_KINDS, ENV_DEVICE
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.setting import bad_setting, choice, setting, three_way
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan

PIPELINE_SCHEDULES = ("1f1b", "gpipe")  # those of parallel.pipeline a training step runs (not forward-only)


def plan_from_text(text: str) -> str | list[list]:
    """The ``plan`` a flag's text gives: 'auto', one strategy ('dp4'), or buckets written
    'tp4:128,dp4:0' or 'tp4:128 | dp4:0' (each strategy with the lower bound of the sequence
    lengths it takes; a strategy placed on ranks, 'tp2@0-1', is a device group, and groups on
    disjoint ranks train side by side: 'tp2@0-1:128 | dp2@2-3:0')."""
    if text == "auto" or ":" not in text:
        return text
    buckets = []
    for part in re.split(r"[,|]", text):
        strategy, _, bound = part.partition(":")
        if not bound.strip().isdigit():
            raise ValueError(f"--plan {text!r}: bucket {part!r} needs a whole-number lower bound, like 'tp4:128,dp4:0'")
        buckets.append([strategy.strip(), int(bound)])
    return buckets


@dataclass(frozen=True)
class ParallelismSettings:
    """``plan``: ``"auto"`` (each batch gets the buckets the cost model predicts fastest), one
    strategy (static training), or buckets ``[[strategy, lower bound], ...]`` ending at 0."""

    plan: str | list = setting(  # noqa: RUF009  (a field with metadata; its default, a str, is immutable)
        "auto",
        "'auto', one strategy ('dp4'), or buckets 'tp4:128,dp2tp2:48,dp4:0' (TOML: [['tp4', 128], ['dp4', 0]]); "
        "device groups on disjoint ranks train side by side: 'tp2@0-1:128,dp2@2-3:0'",
        parse=plan_from_text,
    )
    context_parallel: bool | None = setting(
        None, "--plan auto: weigh context-parallel layouts (cp, ul) too; default: where --max-len reaches 4096"
    )
    side_by_side: bool = setting(
        False,
        "--plan auto: weigh device groups side by side too (the world split in halves or quarters, each group "
        "its own strategy at once); profiles the groups",
    )
    instantiation: str | None = setting(
        None,
        "the strategy the fp32 master weights and AdamW's state live under (e.g. tp2), over every device; "
        "default: the plan's most split by tp x pp",
    )
    shard_optimizer: bool | None = setting(
        None,
        "shard master weights and AdamW's moments over data parallelism (a distributed optimizer); "
        "default: where dp > 1",
    )
    pipeline_schedule: str = setting(
        "1f1b",
        "how a pipeline-parallel strategy orders its micro-batches: 1f1b (one forward, one backward: a "
        "stage keeps at most pp micro-batches' activations) or gpipe (every forward, then every backward)",
        choices=PIPELINE_SCHEDULES,
    )
    device: str | None = setting(
        None,
        f"cpu (gloo) or cuda (one GPU per rank, NCCL); default: ${ENV_DEVICE}, else cpu",
        choices=DEVICE_KINDS,
    )

    def check(self) -> ParallelismSettings:
        choice("device", self.device, DEVICE_KINDS, none=True)
        choice("pipeline_schedule", self.pipeline_schedule, PIPELINE_SCHEDULES)
        if not isinstance(self.plan, str | list | tuple):
            kinds = "give 'auto', a strategy ('dp4'), or buckets [['tp4', 128], ['dp4', 0]]"
            raise bad_setting("plan", self.plan, kinds)
        if self.plan != "auto":
            try:
                HotSwitchPlan.of(self.plan)
            except (ValueError, TypeError) as error:
                raise bad_setting("plan", self.plan, f"{error} (or give 'auto')") from None
        if self.instantiation is not None:
            try:
                group = Strategy.parse(self.instantiation).is_group
            except (ValueError, TypeError) as error:
                fix = f"{error} (e.g. 'tp2', or leave it out)"
                raise bad_setting("instantiation", self.instantiation, fix) from None
            if group:
                why = "the master weights live on every device, not on a group (e.g. 'tp2', or leave it out)"
                raise bad_setting("instantiation", self.instantiation, why)
        three_way("shard_optimizer", self.shard_optimizer, "shard where dp > 1")
        three_way("context_parallel", self.context_parallel, "auto weighs cp from 4,096 tokens")
        if not isinstance(self.side_by_side, bool):
            raise bad_setting("side_by_side", self.side_by_side, "give true or false")
        return self

    def check_world(self, world_size: int) -> None:
        """The plan's strategies and the instantiation each span ``world_size`` devices (a device
        group: lies within them), or the setting is refused naming the fix."""
        plan = self.hot_switch_plan()
        given = [("plan", self.plan, s) for s in ([] if isinstance(plan, str) else plan.strategies)]
        if self.instantiation is not None:
            given.append(("instantiation", self.instantiation, Strategy.parse(self.instantiation)))
        for key, value, strategy in given:
            try:
                strategy.check_fits(world_size)
            except ValueError as error:
                raise bad_setting(key, value, str(error)) from None

    def hot_switch_plan(self) -> HotSwitchPlan | str:
        """A checked section's plan: ``"auto"`` or the ``HotSwitchPlan`` it names."""
        return self.plan if self.plan == "auto" else HotSwitchPlan.of(self.plan)

    def device_kind(self) -> str:
        """The device kind the ranks compute on: ``device``, else $HOTSWITCH_DEVICE, else cpu."""
        return self.device or os.environ.get(ENV_DEVICE) or "cpu"
