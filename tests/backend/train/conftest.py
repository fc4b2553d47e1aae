import pytest

from .train_workers import reference_run

STEPS = 20


@pytest.fixture(scope="session")
def reference():
    """The one-device run every distributed run is compared with."""
    return reference_run(STEPS)
