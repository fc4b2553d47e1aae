"""Training events: plain, JSON-ready dicts handed to a sink callable (rank 0 only).

Every event has ``type`` and ``time`` (seconds since the epoch). The types:

``plan``        ``step``, ``buckets`` ([[strategy, above], ...], longest first), ``order``
                (execution order), ``instantiation``, ``predicted_step_s`` (or None),
                ``source`` ("auto", "fixed" or "buckets").
``graphs``      ``logical`` (``graph.logical.summarize``), ``exec`` ({strategy: ExecGraph.summary()}
                of rank 0).
``step``        ``step``, ``steps`` (planned total), ``tokens``, ``sequences``, ``loss`` (mean token loss),
                ``grad_norm``, ``seconds`` ({compute, switch, grad_sync, update, total}),
                ``tokens_per_s``, ``strategies`` ({strategy: {tokens, seconds, tokens_per_s}}),
                ``switches`` (how many hot switches ran), ``predicted_step_s``.
``switch``      ``step``, ``src``, ``dst``, ``what`` ("params", "grads" into a dp-partial sum,
                "grads_final" into the master layout), ``bytes``, ``predicted_s``, ``seconds``
                (the first time each switch runs; before that step's ``step`` event).
``control``     ``step``, ``command``, and the command's fields: what was applied.
``checkpoint``  ``step``, ``path``.
``warning``     ``message``.
``done``        ``step``, ``reason`` ("finished", "stopped"), ``seconds``, ``tokens``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Sink = Callable[[dict], None]


def event(kind: str, **fields) -> dict:
    return {"type": kind, "time": time.time(), **fields}


def discard(_: dict) -> None:
    """A sink that keeps nothing."""
