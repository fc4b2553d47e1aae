"""What ``Job.switch`` may send: checked in the kernel, so that a bad request is an error in the
cell that made it rather than a warning from the ranks a step later."""

from __future__ import annotations

from collections.abc import Sequence

from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan

AUTO = "auto"
EXAMPLES = '"auto", a strategy such as "dp2tp2", or buckets such as [["tp4", 128], ["dp4", 0]]'


def switch_request(plan: str | Strategy | Sequence, world: int) -> str | list[list]:
    """The control payload for ``plan`` on a job of ``world`` ranks: "auto", a strategy's name, or
    buckets as [[strategy, above], ...]. Raises ValueError naming what is wrong and the forms
    accepted. Whether the strategies fit the memory budget is the trainer's to say."""
    if plan == AUTO:
        return AUTO
    if isinstance(plan, Strategy):
        plan = str(plan)
    if isinstance(plan, str):
        buckets: list[list] = [[plan, 0]]
    elif isinstance(plan, Sequence) and plan and all(_is_bucket(b) for b in plan):
        buckets = [[str(bucket[0]), int(bucket[1])] for bucket in plan]  # pairs, as _is_bucket checked
    else:
        raise ValueError(f"switch takes {EXAMPLES}; got {plan!r}")
    try:
        parsed = HotSwitchPlan.of([(strategy, above) for strategy, above in buckets])
    except ValueError as error:
        raise ValueError(f"cannot switch to {plan!r}: {error}") from None
    ranks = {s.world_size for s in parsed.strategies}
    if ranks != {world}:
        raise ValueError(
            f"cannot switch to {plan!r}: it uses {ranks.pop()} ranks but the job has {world}; "
            f"choose strategies whose dp x tp x pp is {world}"
        )
    return plan if isinstance(plan, str) else buckets


def _is_bucket(bucket) -> bool:
    return (
        isinstance(bucket, Sequence)
        and not isinstance(bucket, str)
        and len(bucket) == 2
        and isinstance(bucket[0], str | Strategy)
        and isinstance(bucket[1], int)
        and not isinstance(bucket[1], bool)
        and bucket[1] >= 0
    )
