"""A small HTML table for ipywidgets.HTML and for exported pages."""

from __future__ import annotations

from html import escape


def html_table(rows: list[dict], limit: int = 100, caption: str = "") -> str:
    """``rows`` as a table with one column per key of the first row; rows past ``limit`` are
    summarised in a last line rather than dropped silently."""
    if not rows:
        return f"<p>{escape(caption)}: none</p>" if caption else "<p>none</p>"
    keys = list(rows[0])
    head = "".join(f"<th style='padding:2px 8px'>{escape(str(k))}</th>" for k in keys)
    body = "".join(
        "<tr>" + "".join(f"<td style='padding:2px 8px'>{escape(_cell(r[k]))}</td>" for k in keys) + "</tr>"
        for r in rows[:limit]
    )
    more = f"<tr><td colspan='{len(keys)}'>... {len(rows) - limit} more rows</td></tr>" if len(rows) > limit else ""
    title = f"<caption style='text-align:left'><b>{escape(caption)}</b></caption>" if caption else ""
    return f"<table style='border-collapse:collapse;font-size:12px'>{title}<tr>{head}</tr>{body}{more}</table>"


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value)
