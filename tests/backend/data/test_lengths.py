"""Document lengths with a log-normal body and a power-law tail, as web text and code have."""

import math

import pytest

from hotswitch.backend.data import SyntheticDocuments
from hotswitch.backend.data.lengths import SYNTHETIC, TAIL_FROM


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_the_tail_joins_the_body_and_the_quantile_inverts_the_survival(name):
    shape = SYNTHETIC[name]
    assert shape.quantile(TAIL_FROM - 1e-9) == pytest.approx(shape.tail_start, rel=1e-6)
    assert shape.quantile(TAIL_FROM) == pytest.approx(shape.tail_start)
    for u in (0.1, 0.5, 0.9, 0.96, 0.999, 0.99999):
        assert shape.fraction_above(shape.quantile(u)) == pytest.approx(1 - u, rel=1e-6)


def test_the_tail_decays_as_a_power_law_where_the_log_normal_would_vanish():
    shape = SYNTHETIC["commoncrawl"]
    # doubling the length divides the share of longer documents by 2**alpha
    assert shape.fraction_above(16384) / shape.fraction_above(32768) == pytest.approx(2**shape.alpha)
    body_only = 0.5 * math.erfc((math.log(16384) - shape.mu) / (shape.sigma * math.sqrt(2)))
    assert shape.fraction_above(16384) > 20 * body_only  # the log-normal alone: ~1 in 8,000 batches of 512


def test_synthetic_documents_follow_their_shape():
    source = SyntheticDocuments("commoncrawl", count=20000)
    lengths = [source.length(i) for i in range(len(source))]
    for at in (1000, 4096, 16384):
        expected = SYNTHETIC["commoncrawl"].fraction_above(at) * len(lengths)
        observed = sum(n > at for n in lengths)
        assert abs(observed - expected) <= 4 * math.sqrt(expected) + 2, (at, observed, expected)
