"""Real jobs on torchrun ranks keep the kernel's memory bounded: a body printing 200k lines and
a 300-step soak with a hot switch every step leave bounded counts of retained lines and events."""

from hotswitch.kernel.cli.headless import follow
from hotswitch.kernel.launch.launcher import rank_log
from hotswitch.kernel.notebook.jobs import event_log, rank_reports

LIMIT_S = 900  # generous: the machine's cores are shared

PRINTER = """
for i in range(200_000):
    print(f"line {i}")
"""

# Sequences are at most 32 tokens, so all go to dp2 while tp2 (the least memory) holds the
# weights: every step switches tp2 -> dp2 and back.
SOAK = """
from hotswitch.backend.train.run import recipe

spec = {"model": "tiny", "steps": 300, "batch_size": 2, "max_len": 32, "token_budget": 64,
        "plan": [["tp2", 64], ["dp2", 0]]}
recipe.run(spec, sink=job.emit, control=job.control)
"""


def test_a_body_printing_200k_lines_leaves_a_bounded_number_of_lines_in_the_kernel(monkeypatch):
    monkeypatch.setattr(rank_reports, "LOG_LINES", 5000)
    job = follow("printer", PRINTER, 1, lambda events: None, LIMIT_S).job
    assert job.status == "succeeded", job.exit_reason
    lines = job.logs(0).splitlines()
    # every line arrived: 195,000 let go from the window, the newest 5,000 kept, none missing
    assert lines[0] == "[hotswitch] 195000 earlier lines of rank 0 were dropped"
    assert len(lines) == 5001 and lines[-1] == "[stdout:0] line 199999"
    assert lines[1:] == [f"[stdout:0] line {i}" for i in range(195_000, 200_000)]
    assert job.channel_losses == {"refused": {}, "ranks": {}, "total": 0}
    # and the rank's own log file keeps all of them
    kept = rank_log(job.spec.log_dir, 0).read_text().splitlines()
    assert kept == [f"line {i}" for i in range(200_000)]


def test_a_300_step_soak_with_a_hot_switch_every_step_keeps_a_bounded_window_of_events(monkeypatch):
    monkeypatch.setattr(event_log, "EVENT_WINDOW", 100)
    job = follow("soak", SOAK, 2, lambda events: None, LIMIT_S).job
    assert job.status == "succeeded", job.exit_reason
    kept = list(job.events)
    assert len(kept) == 100 and len(job.events) >= 300 and job.events.dropped == len(job.events) - 100
    assert job.events[-1] == kept[-1] and job.events[job.events.dropped] == kept[0]
    steps = job.events_of("step")
    numbers = [e["step"] for e in steps]
    assert len(steps) >= 90 and numbers == list(range(numbers[0], numbers[0] + len(steps)))
    assert all(e["switches"] >= 1 for e in steps)  # a hot switch every step
    assert job.events_of("step", len(job.events) - 10) == [e for e in kept[-10:] if e["type"] == "step"]
