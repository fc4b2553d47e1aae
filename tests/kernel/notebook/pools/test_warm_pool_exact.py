"""Training on a warm pool across cells equals one run on one device: 10 steps in one cell, a new
learning rate and a plan switch in another (``%%ranks``), 10 more steps in a third, against the
one-device reference trained 20 steps with the same schedule (fp32)."""

from dataclasses import replace

import pytest
import torch

from hotswitch.backend import get_config
from hotswitch.backend.data import BatchStream, stdlib_documents
from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.state.optim import OptimizerConfig
from tests.kernel.kernel_session import CAP_S, hotswitch_kernel

pytestmark = pytest.mark.slow

MODEL, SEED, BATCH, MAX_LEN, BUDGET, LR = "tiny", 0, 8, 256, 1024, 3e-4
BUILD = f"""
from hotswitch.backend import get_config
from hotswitch.backend.data import BatchStream, stdlib_documents
from hotswitch.backend.train.loop.trainer import Trainer
from hotswitch.backend.train.loop.warm import WarmTrainer

data = BatchStream(stdlib_documents(), {BATCH}, {MAX_LEN}, seed={SEED})
trainer = WarmTrainer(Trainer(get_config({MODEL!r}), data, {{"plan": "dp2", "seed": {SEED}, "token_budget": {BUDGET}}}))
"""


def reference(lr_from: int, steps: int):
    trainer = ReferenceTrainer(get_config(MODEL), OptimizerConfig(), SEED, BUDGET)
    batches = BatchStream(stdlib_documents(), BATCH, MAX_LEN, seed=SEED)
    losses = []
    for step in range(steps):
        if step == lr_from:
            trainer.optim = replace(trainer.optim, lr=LR)
        losses.append(trainer.step(batches.next_batch()))
    return losses, {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def cell(session, code: str) -> str:
    msg_id, reply = session.execute(code, timeout=CAP_S)
    text = session.text(msg_id)
    assert reply["status"] == "ok", text
    return text


def test_ten_and_ten_steps_across_cells_equal_twenty_on_one_device(tmp_path_factory, tmp_path):
    session = hotswitch_kernel(tmp_path_factory)
    try:
        cell(session, f"import os; os.environ['HOTSWITCH_RUNS'] = {str(tmp_path / 'runs')!r}")
        cell(session, "%train_pool start warm -n 2")
        cell(session, f"%%train --pool warm --wait --name first\n{BUILD}\ntrainer.train(10, job)")
        cell(session, f"%%ranks warm\ntrainer.set_lr({LR})\ntrainer.switch('tp2')")
        cell(session, "%%train --pool warm --wait --name second\ntrainer.train(10, job)")
        saved = tmp_path / "params.pt"
        cell(
            session,
            f"%%ranks warm\nparams = trainer.trainer.engine.master.global_params()\n"
            f"if rank == 0:\n    torch.save(params, {str(saved)!r})",
        )
        steps = [session.value(f"[e['loss'] for e in jobs[{n!r}].events_of('step')]") for n in ("first", "second")]
        plans = session.value("[e['buckets'] for e in jobs['second'].events_of('plan')]")
        lrs = session.value("[e['lr'] for e in jobs['second'].events_of('step')]")
    finally:
        session.shutdown()
    assert [len(s) for s in steps] == [10, 10]
    # the second cell's job starts with the plan in force; the switch applies at its first boundary
    assert plans == [[["dp2tp1pp1", 0]], [["dp1tp2pp1", 0]]]
    assert set(lrs) == {LR}
    ref_losses, ref_params = reference(10, 20)
    worst = max(abs(a - b) / abs(b) for a, b in zip(steps[0] + steps[1], ref_losses, strict=True))
    assert worst <= 1e-5, f"a step's loss is off by {worst:.2e}"
    params = torch.load(saved, weights_only=True)
    for name, ref in ref_params.items():
        error = ((params[name] - ref).abs().max() / ref.abs().max()).item()
        assert error <= 1e-4, f"{name} off by {error:.2e} after 20 steps"
