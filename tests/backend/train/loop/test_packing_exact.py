"""Packed micro-batches (documents back to back, attention within each document) train
exactly like one device fed today's padded rows: the oracle itself stays unpacked, so it
checks the packing too.

Every strategy reads the documents from the micro-batch's positions: tensor and sequence
parallelism and pipelines see whole rows; context parallelism's ring masks each block by the
documents its queries and the visiting keys belong to, and Ulysses attends per document on
the whole sequence of its heads. Tolerances are the gradient oracle's
(``test_gradient_oracle.py``): fp32 summation order at step 1, AdamW-amplified rounding after.
"""

import pytest

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.batching import MicroBatching, collate

from ..matching import worst_tensor
from ..train_workers import BUDGET, gradient_runs, packed_auto_run, reference_gradients, stream

STEPS = 2
RUNS = [
    ("dp4", "1f1b"),
    ("dp2tp2sp", "1f1b"),
    ("tp2pp2", "1f1b"),
    ("pp4", "gpipe"),
    ("cp4", "1f1b"),  # ring attention over packed rows
    ("dp2cp2", "1f1b"),
    ("ul2tp2", "1f1b"),  # Ulysses
    ("dp2tp2sel", "1f1b"),  # selective recompute
    ([("cp4", 250), ("tp2pp2", 160), ("dp2tp2sp", 90), ("dp4", 0)], "1f1b"),  # a hot plan mixing them
    ([("cp2@0-1", 250), ("dp2@2-3", 0)], "1f1b"),  # device groups side by side: ring attention beside dp
]


@pytest.fixture(scope="module")
def runs():
    reference = reference_gradients(STEPS)
    return reference, spawn_ranks(gradient_runs, 4, STEPS, RUNS, True, timeout=1200)[0]


def test_the_batches_pack_into_rows_of_several_documents():
    batch = stream().next_batch()
    [micro_batches] = MicroBatching(BUDGET, packed=True).split(Strategy.parse("dp1"), batch)
    assert len(micro_batches) < len(batch), "documents must share rows"
    for group in micro_batches:
        m = collate(group, packed=True)
        assert m.shape == (1, sum(s.length for s in group)) and m.padding == 0
        starts = (m.positions[0] == 0).nonzero().flatten().tolist()
        assert starts == [sum(s.length for s in group[:i]) for i in range(len(group))]


def test_a_target_never_crosses_a_document():
    docs = [Sequence(0, (5, 6, 7)), Sequence(1, (8, 9, 10, 11))]
    m = collate(docs, packed=True)
    assert m.tokens.tolist() == [[5, 6, 8, 9, 10]] and m.targets.tolist() == [[6, 7, 9, 10, 11]]
    assert m.positions.tolist() == [[0, 1, 0, 1, 2]]


@pytest.mark.parametrize("run", [f"{spec}/{schedule}" for spec, schedule in RUNS])
def test_packed_steps_equal_one_unpacked_device(runs, run):
    spec = next(spec for spec, schedule in RUNS if f"{spec}/{schedule}" == run)
    (ref_grads, ref_norms, ref_losses), results = runs
    grads, norms, losses, used = results[run]
    assert len(used) == (1 if isinstance(spec, str) else len(spec)), f"{run}: every bucket must train some sequences"
    for step, (loss, ref_loss) in enumerate(zip(losses, ref_losses, strict=True), 1):
        assert abs(loss - ref_loss) <= 1e-5, f"{run} step {step}: loss {loss} vs {ref_loss}"
    for step, (g, ref, norm, ref_norm) in enumerate(zip(grads, ref_grads, norms, ref_norms, strict=True), 1):
        name, error = worst_tensor(g, ref)
        limit = 5e-6 if step == 1 else 1e-4
        assert error <= limit, f"{run} step {step}: {name}'s gradient is off by {error:.1e}"
        assert abs(norm - ref_norm) / ref_norm <= limit, f"{run} step {step}: norm {norm} vs {ref_norm}"


def test_auto_profiles_plans_and_trains_packed_micro_batches_like_one_device(short_reference):
    losses, plans = spawn_ranks(packed_auto_run, 4, 3, timeout=1200)[0]
    assert plans, "auto announces the plans it chose"
    for step, (loss, ref) in enumerate(zip(losses, short_reference[0][:3], strict=True), 1):
        assert abs(loss - ref) / ref <= 1e-5, f"step {step}: loss {loss} vs one device's {ref}"
