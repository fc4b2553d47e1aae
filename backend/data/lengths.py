"""Document-length distributions of the kinds of corpora HotSPa trains on, for synthetic data
and simulation: a log-normal body with a Pareto (power-law) tail.

Why this shape: document sizes on the web and in code repositories are heavy-tailed: a
log-normal body whose upper tail decays as a power law (web files: Crovella and Bestavros,
"Self-similarity in World Wide Web traffic", 1997, tail index 1.1-1.5; source files: Herraiz,
German and Hassan, "On the distribution of source code file sizes", 2011, a log-normal body
with a power-law tail). A pure log-normal thins out far too fast: with web text's spread, a
512-document batch would almost never hold a document over 8K tokens.

The figures are this project's stand-ins, not fits to HotSPa's datasets (the paper shows its
length histograms only as plots): the bodies' medians (490 tokens of web text, 1,100 of code)
and spreads are assumptions; the tail takes over at the body's 95th percentile, so the tail
index is the only figure it adds, taken from the studies above (web text 1.2; code 1.5). None
of them was tuned to the paper's speedups.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

TAIL_FROM = 0.95  # the quantile above which the Pareto tail replaces the log-normal body


@dataclass(frozen=True)
class LengthShape:
    """Lengths whose logarithm is normal(``mu``, ``sigma``) up to the ``TAIL_FROM`` quantile and
    Pareto with index ``alpha`` above it (continuous at the join)."""

    mu: float
    sigma: float
    alpha: float

    @property
    def tail_start(self) -> float:
        return math.exp(self.mu + self.sigma * NormalDist().inv_cdf(TAIL_FROM))

    def quantile(self, u: float) -> float:
        """The length below which a fraction ``u`` (0 < u < 1) of documents fall."""
        if u < TAIL_FROM:
            return math.exp(self.mu + self.sigma * NormalDist().inv_cdf(u))
        return self.tail_start * ((1 - u) / (1 - TAIL_FROM)) ** (-1 / self.alpha)

    def fraction_above(self, length: float) -> float:
        """The fraction of documents longer than ``length`` tokens."""
        if length >= self.tail_start:
            return (1 - TAIL_FROM) * (self.tail_start / length) ** self.alpha
        return 1 - NormalDist(self.mu, self.sigma).cdf(math.log(length))


SYNTHETIC = {
    "commoncrawl": LengthShape(mu=6.2, sigma=1.0, alpha=1.2),  # web text: short, long thin tail
    "github": LengthShape(mu=7.0, sigma=1.4, alpha=1.5),  # code: longer, wider body
}
