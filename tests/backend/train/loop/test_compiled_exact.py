"""Compiled runs (``compile``: each run of tensor math between attentions torch.compiled, one
compile shared by every block) train exactly like one eager device, in fp32 on the CPU: per-step
loss within 1e-5, gradients at step 1 as the gradient oracle checks them
(``test_gradient_oracle.py``). One hot plan covers the boundaries a run stops at: pipeline
links and checkpointed blocks (``tp2pp2ckpt``), sequence-parallel gathers and tensor-parallel
reductions (``dp2tp2sp``), data parallelism's replicas (``dp4``), in packed rows, whose rotary
tables are gathered at each document's positions; the trainer's own padded rows follow the
run configuration's ``compile``."""

from hotswitch.backend.runtime.spawn import spawn_ranks

from ..matching import worst_tensor
from ..train_workers import gradient_runs, reference_gradients
from .loop_workers import loop_spec, one_device, train_events

STEPS = 2
PLAN = [("tp2pp2ckpt", 200), ("dp2tp2sp", 100), ("dp4", 0)]
RUNS = [(PLAN, "1f1b")]


def test_compiled_packed_steps_equal_one_eager_unpacked_device():
    ref_grads, ref_norms, ref_losses = reference_gradients(STEPS)
    results = spawn_ranks(gradient_runs, 4, STEPS, RUNS, True, True, timeout=1800)[0]
    grads, norms, losses, used = results[f"{PLAN}/1f1b"]
    assert results["compiled_runs"] >= 3, "the runs of every strategy compiled, shared across blocks"
    assert len(used) == len(PLAN), "every bucket must train some sequences"
    for step, (loss, ref_loss) in enumerate(zip(losses, ref_losses, strict=True), 1):
        assert abs(loss - ref_loss) <= 1e-5, f"step {step}: loss {loss} vs {ref_loss}"
    name, error = worst_tensor(grads[0], ref_grads[0])
    assert error <= 5e-6, f"step 1: {name}'s gradient is off by {error:.1e}"
    assert abs(norms[0] - ref_norms[0]) / ref_norms[0] <= 5e-6


def test_the_trainer_compiles_as_its_run_says_reports_the_seconds_and_kernel_and_trains_like_one_device(tmp_path):
    spec = loop_spec(plan="dp2", compile=True, steps=3, max_len=64, batch_size=6, eval_every=None)
    events, _ = spawn_ranks(train_events, 2, spec, str(tmp_path), timeout=1800)[0]
    steps = [e for e in events if e["type"] == "step"]
    reference, _, _ = one_device(spec)
    for step, (e, ref) in enumerate(zip(steps, reference, strict=True), 1):
        assert abs(e["loss"] - ref) <= 1e-5, f"step {step}: loss {e['loss']} vs one device's {ref}"
        assert 0 <= e["compile_s"] <= e["seconds"]["compute"]
    assert steps[0]["compile_s"] > 0, "the first step compiles its runs, and says how long that took"
    graphs = next(e for e in events if e["type"] == "graphs")
    ops = [node["op"] for node in graphs["exec"]["dp2tp1pp1"]["nodes"]]
    assert sum(op.startswith("compiled: ") for op in ops) == 5  # tiny: 4 blocks, 5 runs
    attention = graphs["attention"]  # "auto" on the CPU: its one fused kernel, timed up to the budget
    assert attention["kernel"] == "flash" and attention["seconds"]["flash"] > 0 and attention["lengths"] == [512, 1024]
