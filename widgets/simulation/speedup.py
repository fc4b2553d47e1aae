"""Speedup over the best static strategy against context length, one line per setting and
contender, from ``backend.sim.paper.grid`` rows."""

from __future__ import annotations

import plotly.graph_objects as go

from hotswitch.widgets.figure_widget import FigureWidget

CONTENDERS = {"auto": "auto_vs_static", "c1": "c1_vs_static"}
# auto against each yardstick: the paper's own baselines and the strong static (``sim.paper.baselines``)
PAPER_YARDSTICKS = {
    "vs megatron-paper": "vs_megatron_paper",
    "vs deepspeed-paper": "vs_deepspeed_paper",
    "vs strong static": "vs_strong_static",
}


def speedup_series(rows: list[dict], contenders: dict[str, str] = CONTENDERS) -> dict[str, dict[str, list]]:
    """{"<model>/<gpus> <dataset> <contender>": {"contexts", "speedups"}} in context order; a
    setting where a contender does not fit leaves that context out."""
    out: dict[str, dict[str, list]] = {}
    for r in sorted(rows, key=lambda r: r["context"]):
        for name, key in contenders.items():
            if r.get(key):
                line = out.setdefault(
                    f"{r['model']}/{r['gpus']} {r['dataset']} {name}", {"contexts": [], "speedups": []}
                )
                line["contexts"].append(r["context"])
                line["speedups"].append(r[key])
    return out


def speedup_figure(
    rows: list[dict],
    contenders: dict[str, str] = CONTENDERS,
    title: str = "speedup over the best static strategy (simulated)",
) -> FigureWidget:
    """The speedup over the best static strategy against context length, a line per contender
    (``contenders``: row key -> legend), from the rows of ``sim.paper.paper_grid``."""
    fig = go.Figure()
    for name, line in speedup_series(rows, contenders).items():
        fig.add_scatter(
            x=line["contexts"],
            y=line["speedups"],
            mode="lines+markers",
            name=name,
            line={"dash": "dot" if name.endswith(("c1", "static")) else "solid"},
        )
    fig.add_hline(y=1.0, line_color="gray")
    fig.update_layout(
        title=title,
        xaxis={"title": "context (tokens)", "type": "log", "tickvals": sorted({r["context"] for r in rows})},
        yaxis_title="speedup (x)",
    )
    return FigureWidget(fig)
