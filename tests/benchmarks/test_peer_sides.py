"""``benchmarks/peers.py`` compares like with like: its transformers peer, started from the
engine's initial weights, trains the engine's model, so that on the same batch, cut into the
same padded micro-batches, its loss equals the engine's step after step (the same loss
scaling over micro-batches, the same clipping, the same AdamW update), and each side restarted
(as every row starts) takes its first step again. A side that runs out of device memory is
recorded as such rather than ending the whole run, and a side left out (``--sides``) is marked
skipped on every row."""

from __future__ import annotations

import pytest
import torch

from benchmarks.common.peer_sides import OOM, EngineSide, TransformersSide, measure
from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.runtime.spawn import spawn_ranks

LENGTHS = (40, 31, 17, 9, 3)  # at BUDGET: three micro-batches ([40], [31, 17], [9, 3]), two padded
BUDGET = 64
STEPS = 3


def losses_of_both_sides(rank: int, world: int, documents: bool) -> list[list[float]]:
    """The engine's and the transformers peer's losses, ``STEPS`` steps on one batch each, and
    how each describes its attention; ``documents``: the engine packs the batch (transformers
    pads it either way)."""
    config = get_config("tiny").with_(max_seq_len=BUDGET)
    generator = torch.Generator().manual_seed(1)
    batch = [
        Sequence(doc, tuple(torch.randint(0, config.vocab_size, (n + 1,), generator=generator).tolist()))
        for doc, n in enumerate(LENGTHS)
    ]
    cpu = torch.device("cpu")
    engine = EngineSide(config, cpu, Precision.of("fp32"))
    peer = TransformersSide(config, cpu, mixed=False, compiled=False, same_weights=True)
    out = []
    for side in (engine, peer):
        side.use_budget(BUDGET, documents=documents)
        losses = [side.step(batch) for _ in range(STEPS)]
        side.restart()  # as every row of peers.py starts: the first step's loss again
        out.append([*losses, side.step(batch)])
    return out, [side.attention("flash (cpu)") for side in (engine, peer)]


@pytest.mark.parametrize("documents", [False, True], ids=["padded", "engine-packed"])
def test_the_transformers_peer_takes_the_engines_steps_and_each_starts_over_on_restart(documents):
    (engine, peer), attention = spawn_ranks(losses_of_both_sides, 1, documents)[0]
    # what a profile saw, and on packed rows how the engine attends their documents (on the CPU:
    # a call per document, the one way it weighs) and what that way took when it chose
    packed = "flash (cpu); packed rows: a call per document (timed: a call per document "
    assert attention[0].startswith(packed) if documents else attention[0] == "flash (cpu)"
    assert attention[1] == "flash (cpu)"
    assert engine[STEPS - 1] < engine[0], f"training one batch {STEPS} times did not lower its loss: {engine}"
    for step, (ours, theirs) in enumerate(zip(engine, peer, strict=True), 1):
        assert abs(ours - theirs) <= 1e-5 * ours, f"step {step}: the engine's loss {ours}, transformers' {theirs}"
    for losses in (engine, peer):
        assert abs(losses[STEPS] - losses[0]) <= 1e-6 * losses[0], f"restarted, the first loss is not again: {losses}"


def failing_step(error: Exception):
    def step(batch):
        raise error

    return step


@pytest.mark.parametrize(
    "error",
    [
        torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),  # how cuDNN reports a failed allocation
    ],
)
def test_a_side_out_of_memory_is_recorded_with_the_message(error):
    done = measure(failing_step(error), [[]], warmups=1, timed=1, cuda=False)
    assert done.step_s == OOM
    assert str(error) in done.note


def test_any_other_failure_is_raised():
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        measure(failing_step(RuntimeError("shapes cannot be multiplied")), [[]], warmups=1, timed=1, cuda=False)


def test_rows_narrow_a_preset_to_what_was_asked_with_the_compiled_peer_after_the_eager_sides():
    from benchmarks.common.peer_presets import CUDA, DOCS_1B, only_rows

    narrowed = only_rows(CUDA, ["refinedweb", "7b-shape-8-layers 1x8192"])
    assert [(m.label, [r.label for r in m.rows]) for m in narrowed.models] == [
        ("1b", [DOCS_1B.label]),
        ("7b-shape-8-layers", ["1x8192"]),
    ]
    assert narrowed.compiled == (("7b-shape-8-layers", "1x8192"), ("1b", DOCS_1B.label))
    assert narrowed.compiled_first == 0 and CUDA.compiled_first == 1
    with pytest.raises(SystemExit, match="no row"):
        only_rows(CUDA, ["70b"])


def test_sides_left_out_are_skipped_on_every_row_with_a_note():
    from benchmarks.common.peer_presets import SMOKE
    from benchmarks.peers import run_preset

    out = spawn_ranks(run_preset, 1, SMOKE, ("engine",))[0]
    assert [r["shape"] for r in out["rows"]] == [r.label for r in SMOKE.models[0].rows]
    for row in out["rows"]:
        assert isinstance(row["engine_step_s"], float) and row["engine_loss"] > 0
        assert row["transformers_step_s"] == row["transformers_compiled_step_s"] == "skipped"
        assert "transformers: not asked for (--sides)" in row["notes"] and row["transformers_over_engine"] is None
