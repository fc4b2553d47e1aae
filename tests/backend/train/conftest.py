import pytest

from .train_workers import reference_run

STEPS = 20
SHORT_STEPS = 10


@pytest.fixture(scope="session")
def reference():
    """The one-device run every distributed run is compared with."""
    return reference_run(STEPS)


@pytest.fixture(scope="session")
def short_reference():
    """The same, for the shorter pipeline and sequence-parallel runs."""
    return reference_run(SHORT_STEPS)
