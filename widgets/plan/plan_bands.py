"""The plans in force, drawn over a dashboard's tokens/s chart: a shaded band per plan, and a
label per band laid out so that no two labels overlap, however short the phases.

A label is written inside its band, from the band's left edge; where the band is too narrow for
the whole text it is cut short ("dp4+…"), and where even that does not fit it is left out. Every
label that shows carries the plan's full order as hover text, and every plan change after the
first has its marker, whose hover text names the order too.
"""

from __future__ import annotations

from hotswitch.widgets.palette import strategy_color

LABEL_FONT_PX = 10
CHAR_PX = 0.65 * LABEL_FONT_PX  # wider than the font's mean glyph: estimates must err on the wide side
LABEL_GAP_PX = 4  # kept free between a label and the next band
ELLIPSIS = "…"
MIN_SHOWN_CHARS = 2  # a cut label shows at least this much of the order, then the ellipsis


def band_span(band: list) -> tuple[float, float]:
    """The x extent of band [first step, last step, order]: from after its first step to after
    its last (at least one step wide)."""
    first, last, _ = band
    return first + 0.5, max(last, first + 1) + 0.5


def band_text(band: list) -> str:
    return "+".join(band[2])


def x_extent(steps: list[float], bands: list[list]) -> tuple[float, float]:
    """The x range a chart of ``steps`` with ``bands`` spans (what its axis autoranges to, give
    or take the markers' padding)."""
    xs = [*steps, *(x for band in bands for x in band_span(band))]
    return (min(xs), max(xs)) if xs else (0.0, 1.0)


def band_shapes(bands: list[list], strategies: list[str]) -> list[dict]:
    """A shaded rectangle per plan in force, coloured by the plan's first strategy."""
    shapes = []
    for band in bands:
        order = band[2]
        index = strategies.index(order[0]) if order and order[0] in strategies else 0
        x0, x1 = band_span(band)
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": x0,
                "x1": x1,
                "y0": 0,
                "y1": 1,
                "fillcolor": strategy_color(index),
                "opacity": 0.12,
                "line": {"width": 0},
                "layer": "below",
            }
        )
    return shapes


def band_labels(bands: list[list], x_range: tuple[float, float], plot_px: float) -> list[dict]:
    """Annotations naming each band's plan, for an x axis showing ``x_range`` over ``plot_px``
    pixels: each one inside its band (bands do not overlap, so neither do labels), cut short or
    left out where the band is too narrow."""
    low, high = x_range
    px_per_step = plot_px / (high - low) if high > low else 0.0
    labels = []
    for band in bands:
        x0, x1 = band_span(band)
        text = fitted(band_text(band), (x1 - x0) * px_per_step - LABEL_GAP_PX)
        if not text:
            continue
        labels.append(
            {
                "text": text,
                "hovertext": f"{band_text(band)} from step {band[0] + 1}",  # the plan came after step band[0]
                "x": x0,
                "xref": "x",
                "xanchor": "left",
                "y": 1,
                "yref": "y domain",
                "yanchor": "top",
                "showarrow": False,
                "borderpad": 0,
                "font": {"size": LABEL_FONT_PX},
            }
        )
    return labels


def fitted(text: str, room_px: float) -> str:
    """``text`` if it fits in ``room_px``; else as much of it as fits (whole strategies where one
    does) followed by an ellipsis; "" when not even ``MIN_SHOWN_CHARS`` do."""
    chars = int(room_px // CHAR_PX)
    if chars >= len(text):
        return text
    if chars - 1 < MIN_SHOWN_CHARS:
        return ""
    cut = text[: chars - 1]
    return (cut[: cut.rindex("+") + 1] if "+" in cut else cut) + ELLIPSIS


def label_width_px(text: str) -> float:
    """The estimated width of a label (what ``fitted`` allows for)."""
    return len(text) * CHAR_PX
