"""The plan labels over the tokens/s chart never overlap: each is laid out inside its band, cut
short or left out where the band is too narrow, with the plan's full order as hover text."""

import itertools

from hotswitch.widgets.plan.plan_bands import ELLIPSIS, band_labels, band_shapes, band_span, label_width_px, x_extent

PLOT_PX = 600
ORDERS = (["dp4", "tp4"], ["dp2tp2"], ["dp1tp2pp2", "dp4", "tp4"])


def bands_of(lengths: list[int]) -> list[list]:
    """Consecutive bands of ``lengths`` steps, cycling through ``ORDERS``."""
    bands, first = [], 0
    for length, order in zip(lengths, itertools.cycle(ORDERS)):
        bands.append([first, first + length, order])
        first += length
    return bands


def pixels(labels: list[dict], bands: list[list], steps: list[int]):
    """Each label's [left, right] in pixels, beside its band's."""
    low, high = x_extent(steps, bands)
    scale = PLOT_PX / (high - low)
    by_x = {band_span(b)[0]: b for b in bands}
    for label in labels:
        band = by_x[label["x"]]
        left = (label["x"] - low) * scale
        x0, x1 = ((x - low) * scale for x in band_span(band))
        yield label, band, (left, left + label_width_px(label["text"])), (x0, x1)


def test_short_phases_get_labels_that_never_overlap_and_stay_in_their_band():
    lengths = [40, 1, 1, 2, 1, 3, 1, 1, 25, 1, 2, 1, 1, 4, 60, 1, 1, 1, 2, 30]
    bands = bands_of(lengths)
    steps = list(range(1, sum(lengths) + 1))
    labels = band_labels(bands, x_extent(steps, bands), PLOT_PX)
    placed = list(pixels(labels, bands, steps))
    assert 0 < len(labels) < len(bands), "the narrowest phases lose their label"
    for label, band, (left, right), (x0, x1) in placed:
        assert x0 <= left and right <= x1, (label["text"], band)
        full = "+".join(band[2])
        assert label["text"] == full or (label["text"].endswith(ELLIPSIS) and full.startswith(label["text"][:-1]))
        assert label["hovertext"].startswith(full)
    extents = sorted(extent for _, _, extent, _ in placed)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(extents)), "two labels overlap"
    texts = [label["text"] for label in labels]
    assert "dp4+tp4" in texts, "a long phase keeps its whole name"
    assert any(text.endswith(ELLIPSIS) for text in texts), "a phase a little too short shows the start of its name"


def test_phases_of_one_step_each_over_a_long_run_draw_no_label_at_all():
    bands = bands_of([1] * 500)
    steps = list(range(1, 501))
    assert band_labels(bands, x_extent(steps, bands), PLOT_PX) == []
    assert len(band_shapes(bands, ["dp4", "tp4", "dp2tp2"])) == 500  # the bands themselves all show


def test_a_single_plan_is_labelled_in_full():
    bands = [[0, 8, ["dp4", "tp4"]]]
    (label,) = band_labels(bands, x_extent(list(range(1, 9)), bands), PLOT_PX)
    assert (label["text"], label["hovertext"]) == ("dp4+tp4", "dp4+tp4 from step 1")
