"""The failing frame's locals under a rank's traceback: short, safe, values not definitions."""

import sys

import torch

from hotswitch.kernel.worker.frame_locals import SHOWN, WIDTH, failing_locals, short_repr


class Unprintable:
    def __repr__(self):
        raise RuntimeError("no")


def _traceback_of(code: str, namespace: dict):
    try:
        exec(compile(code, "<cell>", "exec"), namespace)
    except ZeroDivisionError:
        return sys.exc_info()[2]
    raise AssertionError("the code did not raise")


def test_the_innermost_frame_s_locals_are_listed_short_and_safely():
    code = "def inner(weights, n):\n    label = 'x' * 500\n    odd = Unprintable()\n    return n / 0\ninner(t, 3)\n"
    text = failing_locals(_traceback_of(code, {"t": torch.zeros(4, 8), "Unprintable": Unprintable}))
    lines = text.splitlines()
    assert lines[0] == "locals of inner (<cell>:4):"
    assert "    weights = Tensor(shape=(4, 8), dtype=torch.float32)" in lines  # never the values
    assert "    n = 3" in lines
    assert any(line.startswith("    odd = <Unprintable instance at ") for line in lines)  # its repr raised
    label = next(line for line in lines if line.startswith("    label = "))
    assert len(label) <= len("    label = ") + WIDTH


def test_a_module_level_frame_shows_values_not_what_it_imported_or_defined():
    code = "import math\ndef helper():\n    pass\nclass Kind:\n    pass\nsteps = 7\nsteps / 0\n"
    text = failing_locals(_traceback_of(code, {}))
    assert text.splitlines() == ["locals of <module> (<cell>:7):", "    steps = 7"]


def test_many_locals_are_counted_past_the_shown_ones_and_no_traceback_shows_nothing():
    names = "\n".join(f"v{i} = {i}" for i in range(SHOWN + 5))
    text = failing_locals(_traceback_of(names + "\n1 / 0\n", {}))
    assert text.splitlines()[-1] == "    ... and 5 more"
    assert failing_locals(None) == ""
    assert short_repr(list(range(100))).endswith("...]")
