"""What a job's channel lost, counted on both ends: nothing a rank sends vanishes unsaid.

The kernel counts the messages it refused (by reason, ``ChannelStats``); each rank says how many
output lines it sent (so lines that never arrived are counted) and how many messages it gave up
on while the kernel was away (``RankReports.losses``).
"""

from __future__ import annotations

from dataclasses import asdict


def channel_losses(stats, rank_losses: dict[int, dict[str, int]]) -> dict:
    """``{"refused": {reason: count}, "ranks": {rank: {"missing_lines", "unsent"}}, "total": n}``:
    the kernel's refusals (``stats``, a ``ChannelStats``) and each rank's losses; empty maps and
    a total of 0 when nothing was lost."""
    refused = {reason: count for reason, count in asdict(stats).items() if count and reason != "accepted"}
    ranks = {rank: lost for rank, lost in rank_losses.items() if any(lost.values())}
    total = sum(refused.values()) + sum(sum(lost.values()) for lost in ranks.values())
    return {"refused": refused, "ranks": ranks, "total": total}


def losses_note(losses: dict) -> str:
    """A line for the cell saying what was lost, or "" when nothing was."""
    if not losses["total"]:
        return ""
    parts = []
    if losses["refused"]:
        counts = ", ".join(f"{count} {reason}" for reason, count in losses["refused"].items())
        parts.append(f"the kernel refused {sum(losses['refused'].values())} messages ({counts})")
    for rank, lost in losses["ranks"].items():
        if lost.get("missing_lines"):
            parts.append(f"{lost['missing_lines']} output lines of rank {rank} never arrived")
        if lost.get("unsent"):
            parts.append(f"rank {rank} gave up on {lost['unsent']} messages while the kernel was away")
    where = "job.channel_losses; each rank's log file keeps its lines"
    return f"[hotswitch] the channel lost messages: {'; '.join(parts)} ({where})\n"
