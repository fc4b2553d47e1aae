"""The paper's own baselines and the calibrated device model: the fit's error on its points, the
held-out points, the sweeps' refusals, the artifact's row packing."""

import pytest

from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.datasets import batch_lengths
from hotswitch.backend.sim.device import PRESETS
from hotswitch.backend.sim.paper.baselines import paper_contenders
from hotswitch.backend.sim.paper.calibrate import HELD_OUT_LIMIT, report
from hotswitch.backend.sim.paper.compare import compare
from hotswitch.backend.sim.paper.deepspeed import deepspeed_step_s
from hotswitch.backend.sim.paper.megatron import megatron_step_s, megatron_sweep
from hotswitch.backend.sim.paper.rows import bucketed_rows, context_rows, first_fit_rows
from hotswitch.backend.sim.scenario import Setup, sim_model
from hotswitch.backend.strategy import Strategy

BF16 = Precision.of("bf16")


@pytest.fixture(scope="module")
def calibration():
    return report()


def test_the_calibrated_device_model_predicts_the_logged_megatron_runs(calibration):
    fitted = [p for p in calibration["points"] if p["fitted_on"]]
    held = [p for p in calibration["points"] if not p["fitted_on"]]
    assert len(fitted) >= 4 and len(held) >= 4
    assert all(abs(p["rel_err"]) <= 0.10 for p in fitted), fitted
    assert all(abs(p["rel_err"]) <= HELD_OUT_LIMIT for p in held), held
    assert calibration["held_out_within_limit"]
    assert all("Sakura-gh/Megatron-LM" in p["log"] for p in calibration["points"])


def test_the_fixed_cost_per_micro_batch_makes_small_micro_batches_dearer_per_token():
    config, spec = sim_model("7b"), PRESETS["H800"]
    cluster, s = spec.cluster(8), Strategy(1, 4, 2, sp=True)
    docs = batch_lengths("commoncrawl", 16384)
    small, large = (megatron_step_s(config, cluster, spec, BF16, s, mbs, docs) for mbs in (1, 16))
    assert small > 1.5 * large  # the logs: MBS 1 runs far slower than MBS 16 on the same documents


def test_the_megatron_sweep_refuses_naming_the_limit_when_no_mbs_fits():
    setup = Setup("32b", 8, 32768, [32768] * 8)
    with pytest.raises(
        ValueError,
        match=r"megatron-paper without recompute: no layout of dp8tp1pp1 holds even MBS 1 "
        r"of 32768-token documents: it needs at least [\d.]+ GiB per device, the limit is 74.0 GiB",
    ):
        megatron_sweep(setup.config, setup.cluster, setup.spec, BF16, [Strategy(8)], setup.lengths, 32768)


def test_unknown_contender_names_are_refused_before_anything_runs():
    setup = Setup("7b", 8, 4096, [4096] * 4)
    with pytest.raises(ValueError, match=r"unknown contender 'megatron'; choose from megatron-paper"):
        compare(setup, "7b", baselines=("megatron",))
    with pytest.raises(ValueError, match="unknown contender 'zero'"):
        paper_contenders(setup, "7b", ("zero",))


def test_the_artifact_packs_first_fit_into_context_rows_and_c1_into_4k_16k_32k_rows():
    assert first_fit_rows([3000, 2000, 1000, 1000, 100], 4096) == [4096, 4096]
    assert context_rows([5000, 100, 100], 8192) == [8192]
    rows = bucketed_rows([100, 200, 5000, 20000, 3000], 32768)
    assert sorted(rows) == [4096, 16384, 32768]
    assert bucketed_rows([100, 5000], 4096 * 2) == [4096, 8192]  # row kinds capped at the context
    with pytest.raises(ValueError, match="5000 tokens does not fit a 4096-token row"):
        first_fit_rows([5000], 4096)


def test_dense_rows_cost_more_than_packed_documents_and_zero3_pays_its_gathers():
    setup = Setup("7b", 8, 16384, batch_lengths("commoncrawl", 16384))
    named = paper_contenders(setup, "7b", ("megatron-paper+recompute", "hetu-static-paper", "hotspa-c1-paper"))
    assert named["hetu-static-paper"].step_s > named["hotspa-c1-paper"].step_s  # 4K rows beat 16K rows
    rows = len(context_rows(setup.lengths, 16384))
    assert deepspeed_step_s(setup, rows, 3, 1, 1, True) > deepspeed_step_s(setup, rows, 1, 1, 1, True)
