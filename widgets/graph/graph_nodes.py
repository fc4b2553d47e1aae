"""What a graph view draws: summary nodes as drawable nodes, repeated layers collapsed to boxes.

Takes the plain data of ``graph.logical.summarize`` or ``ExecGraph.summary`` and returns plain
data; nothing here plots.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

ALL_LAYERS = "all"
_LAYER_IN_NAME = re.compile(r"(?:^|[._])layers(?:\.|__)(\d+)(?:\.|__)")


@dataclass(frozen=True)
class DrawnNode:
    """One marker. ``kind`` is a node kind, "dummy" (a comm node that is an identity in the
    strategy shown) or "layer" (a collapsed transformer layer); ``members`` are the summary
    nodes a layer box stands for, ``counts`` their kinds."""

    name: str
    kind: str
    label: str
    hover: str
    layer: int | None = None
    members: tuple[str, ...] = ()
    counts: tuple[tuple[str, int], ...] = ()


def _placement_text(state: dict) -> str:
    devices = state["devices"]
    group = f"{devices[0]}-{devices[-1]}" if len(devices) > 1 else str(devices[0])
    return f"{', '.join(state['placements'])} on mesh {state['mesh']} (devices {group})"


def logical_nodes(summary: dict, strategy: str) -> list[DrawnNode]:
    """Every logical node as drawn for ``strategy``: comm nodes without steps there are dummies."""
    drawn = []
    for n in summary["nodes"]:
        kind = n["kind"]
        if kind == "comm" and not n["comm"][strategy]:
            kind = "dummy"
        lines = [f"<b>{n['name']}</b> ({kind})", f"op: {n['op']}", f"shape: {n['shape']}"]
        if n["source"]:
            lines.append(f"source: {n['source']}")
        for s, state in n["states"].items():
            comm = ""
            if n["kind"] == "comm":
                comm = " | " + (" + ".join(n["comm"][s]) or "dummy")
            mark = "▶ " if s == strategy else ""
            lines.append(f"{mark}{s}: {_placement_text(state)}{comm}")
        label = " + ".join(n["comm"][strategy]) if kind == "comm" else n["op"]
        drawn.append(DrawnNode(n["name"], kind, label, "<br>".join(lines), n["layer"]))
    return drawn


def exec_nodes(summary: dict) -> list[DrawnNode]:
    """The executable graph's nodes; layers come from parameter names, in program order."""
    drawn = []
    layer = None
    for n in summary["nodes"]:
        if n["kind"] == "param" and n["name"].endswith("weight"):  # rope tables are not weights
            found = _LAYER_IN_NAME.search(n["name"])
            layer = int(found.group(1)) if found else None
        lines = [f"<b>{n['name']}</b> ({n['kind']})", f"op: {n['op']}", f"inputs: {', '.join(n['inputs']) or '-'}"]
        drawn.append(DrawnNode(n["name"], n["kind"], n["op"].split(",")[0], "<br>".join(lines), layer))
    return drawn


def summary_edges(summary: dict) -> list[tuple[str, str]]:
    return [(i, n["name"]) for n in summary["nodes"] for i in n["inputs"]]


def collapse_layers(
    nodes: list[DrawnNode], edges: list[tuple[str, str]], expanded: str | int | None
) -> tuple[list[DrawnNode], list[tuple[str, str]]]:
    """Replace every layer but ``expanded`` (a layer index, ``ALL_LAYERS`` or None) by one box.

    Edges inside a box vanish, edges into or out of it are kept once. Sources read by several
    layers (the rotary tables) stay outside every box. Each box is listed where its first
    member was.
    """
    if expanded == ALL_LAYERS:
        return list(nodes), list(edges)
    layer_of = {n.name: n.layer for n in nodes}
    readers: dict[str, set] = {}
    for a, b in edges:
        readers.setdefault(a, set()).add(layer_of[b])
    fed = {b for _, b in edges}
    shared = {n.name for n in nodes if n.name not in fed and len(readers.get(n.name, ())) > 1}
    box_of: dict[str, str] = {}
    members: dict[str, list[DrawnNode]] = {}
    out: list[DrawnNode | str] = []
    for n in nodes:
        if n.layer is None or n.layer == expanded or n.name in shared:
            out.append(n)
            continue
        box = f"layer {n.layer}"
        box_of[n.name] = box
        if box not in members:
            members[box] = []
            out.append(box)
        members[box].append(n)
    drawn = [n if isinstance(n, DrawnNode) else _box(n, members[n]) for n in out]
    seen = set()
    kept = []
    for a, b in edges:
        edge = (box_of.get(a, a), box_of.get(b, b))
        if edge[0] != edge[1] and edge not in seen:
            seen.add(edge)
            kept.append(edge)
    return drawn, kept


def _box(name: str, members: list[DrawnNode]) -> DrawnNode:
    counts = tuple(sorted(Counter(m.kind for m in members).items()))
    text = ", ".join(f"{k} {v}" for k, v in counts)
    hover = f"<b>{name}</b> (collapsed)<br>{len(members)} nodes: {text}<br>expand it with the layer control"
    return DrawnNode(name, "layer", name, hover, members[0].layer, tuple(m.name for m in members), counts)
