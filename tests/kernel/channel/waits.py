"""Waiting on a channel's progress in its tests: the condition is checked every 10 ms and the
wait ends as soon as it holds; the limit is generous, so a busy machine slows a test down
without failing it."""

import time

LIMIT_S = 60.0


def until(condition, timeout: float = LIMIT_S) -> bool:
    """Whether ``condition()`` holds within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())
