import functools

import pytest

from .train_workers import reference_runs

STEPS = 20
SHORT_STEPS = 10


@functools.cache
def _references():
    """One one-device run of ``STEPS``, noted after ``SHORT_STEPS`` too: the short reference is
    its beginning (the same batches, weights and schedule), so it is not trained again."""
    return reference_runs(STEPS, SHORT_STEPS)


@pytest.fixture(scope="session")
def reference():
    """The one-device run every distributed run is compared with."""
    return _references()[1]


@pytest.fixture(scope="session")
def short_reference():
    """The same, for the shorter pipeline and sequence-parallel runs."""
    return _references()[0]
