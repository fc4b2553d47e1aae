"""What each tutorial claims, read back from the outputs of its executed copy: a cell shows its
values to the reader, and the claim here parses what it showed. A check that needs objects the
notebook does not show lives in a cell tagged ``hidden-check`` instead (JupyterLab hides it)."""

from __future__ import annotations

import ast
import json
import re

from hotswitch.backend.layout import stage_layers
from hotswitch.backend.strategy import Strategy

# a step's loss against one device's: float32 rounding of the same sums in another order
EXACT = 1e-5
# HotSPa reports one hot switch of 32B on 32 GPUs in under a second
PAPER_SWITCH_S = 1.0


def shown(notebook, cell_id: str) -> str:
    """What the cell with this id showed: its printed text, then its results' plain text."""
    cells = [c for c in notebook.cells if c.get("id") == cell_id]
    assert len(cells) == 1, f"no cell with id {cell_id!r}: a claim reads it"
    parts = []
    for output in cells[0].outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif "text/plain" in output.get("data", {}):
            parts.append(output.data["text/plain"] + "\n")
    return "".join(parts)


def source_value(notebook, cell_id: str, pattern: str):
    """A value written in a cell's source (the setting a claim is about), by regex group."""
    [cell] = [c for c in notebook.cells if c.get("id") == cell_id]
    return ast.literal_eval(_one(pattern, cell.source))


def _one(pattern: str, text: str) -> str:
    matches = re.findall(pattern, text, re.MULTILINE)
    assert len(matches) == 1, f"{pattern!r} matched {len(matches)} times in:\n{text}"
    return matches[0]


def _value(pattern: str, text: str):
    """The Python literal a line shows (a list, a dict, a number), found by ``pattern``'s group."""
    return ast.literal_eval(_one(pattern, text))


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _ranks(text: str) -> dict:
    """A ``%%ranks`` cell's values, one ``Out[rank]: value`` line each."""
    return {int(rank): ast.literal_eval(value) for rank, value in re.findall(r"^Out\[(\d+)\]: (.*)$", text, re.M)}


def _succeeded(notebook, cell_id: str, job: str) -> None:
    assert f"job '{job}' succeeded" in shown(notebook, cell_id), shown(notebook, cell_id)


def quickstart(nb) -> None:
    plan = shown(nb, "plan")
    buckets = [(s, int(above)) for above, s in re.findall(r"longer than\s+(\d+) tokens -> (\S+)", plan)]
    assert buckets and buckets[-1][1] == 0, "the last bucket takes every remaining sequence"
    order = _one(r"^order within a step: (.*)$", plan).split(" -> ")
    assert order[-1] == _one(r"^instantiation strategy: (\S+)$", plan), plan

    first = shown(nb, "first-step")
    tokens = int(_one(r"^step \d+: (\d+) tokens", first))
    assert sum(int(t) for t in re.findall(r"^\s+\S+\s+(\d+) tokens ", first, re.M)) == tokens, first

    paused = int(_one(r"paused after step (\d+)", shown(nb, "pause")))
    assert int(_one(r"still at step (\d+)", shown(nb, "still-paused"))) == paused, "a step ran while paused"
    assert shown(nb, "refused").strip(), "switching to dp4 under the budget warns"

    pinned = shown(nb, "pinned")
    assert _value(r"^plan now: (.*)$", pinned) == [[buckets[0][0], 0]], pinned
    used = re.findall(r"^step \d+ trained under (.*)$", pinned, re.M)
    assert len(used) >= 2 and set(used) == {buckets[0][0]}, pinned
    assert set(re.findall(r"^plan from (\S+) ", shown(nb, "auto-again"), re.M)) <= {"auto"}

    result = shown(nb, "result")
    assert "the job succeeded" in result, result
    steps = source_value(nb, "launch", r'"steps": (\d+)')
    assert _value(r"^steps reported: (.*)$", result) == list(range(1, steps + 1)), "every step reported, in order"
    first_loss, last_loss = (float(x) for x in _one(r"^loss\s+(\S+) -> (\S+)$", result))
    assert last_loss < first_loss, "the model learns"
    by_strategy = re.findall(r"^  \S+\s+([\d,]+)\s+[\d,]+$", result, re.M)
    assert sum(_number(t) for t in by_strategy) == _number(_one(r"^tokens\s+([\d,]+)$", result)), result
    assert _value(r"^commands applied: (.*)$", result) == ["pause", "switch", "resume", "switch"], result


def inspect_plans(nb) -> None:
    graph = shown(nb, "logical-graph")
    needs = {s: (int(n), int(of)) for s, n, of in re.findall(r"^(\S+)\s+needs\s+(\d+) of the (\d+) comm", graph, re.M)}
    assert needs["dp32tp1pp1"][0] == 0, "pure data parallelism converts nothing in the forward pass"
    tensor_parallel = [s for s in needs if Strategy.parse(s).tp > 1]
    assert tensor_parallel and all(needs[s][0] == needs[s][1] for s in tensor_parallel), graph

    rank, strategy = 21, Strategy.parse("dp4tp4pp2")  # the rank and strategy the notebook compiles
    tp_group = _one(rf"^{strategy}\s.*rank {rank} sits.*tensor-parallel group is (\[.*\])$", shown(nb, "strategies"))
    compiled = shown(nb, "exec-graph")
    collectives = _value(r"collectives: (\{.*\})$", compiled)
    assert collectives and all(op.endswith(f"ranks={tp_group}") for op in collectives), "collectives stay in the group"
    stage, low, high, count = map(
        int, _one(r"pipeline stage (\d+) and runs layers (\d+) to (\d+) \((\d+) layers", compiled)
    )
    n_layers = int(_one(r"(\d+) layers, hidden", shown(nb, "setup")))
    assert count == high - low + 1 and range(low, high + 1) == stage_layers(n_layers, strategy.pp)[stage], compiled

    slowest_ms = float(_one(r"slowest predicted switch of 32B on 32 GPUs: (\d+) ms", shown(nb, "slowest")))
    assert slowest_ms < PAPER_SWITCH_S * 1e3, f"32B on 32 GPUs: a switch of {slowest_ms} ms"


def hot_vs_static(nb) -> None:
    spec = json.loads(shown(nb, "spec").splitlines()[1])
    _succeeded(nb, "compare", "compare")
    statics = shown(nb, "statics")
    fits = re.findall(r"^  (\S+)\s+[\d.]+$", statics, re.M)
    best = _one(r"^the fastest, trained below: (\S+)$", statics)
    assert fits and best == fits[0], "the static strategy trained is the one predicted fastest"
    infeasible = _value(rf"do not hold {spec['max_len']} tokens .*: (\{{.*\}})$", statics)
    assert all(longest < spec["max_len"] for longest in infeasible.values()), statics

    used = shown(nb, "tokens-by-strategy")
    tokens = [int(_number(t)) for t in re.findall(r"^  \S+\s+([\d,]+) tokens$", used, re.M)]
    assert sum(tokens) == _number(_one(r"^  of all\s+([\d,]+) tokens", used)), used
    assert sum(t > 0 for t in tokens) >= 2, "hot switching trains the batches under more than one strategy"

    exact = dict(re.findall(r"^(.+?)\s+worst step's loss differs from one device by (\S+)$", shown(nb, "exact"), re.M))
    assert set(exact) == {"hot switching", best} and all(float(w) <= EXACT for w in exact.values()), exact

    _succeeded(nb, "first-half", "first-half")
    _succeeded(nb, "second-half", "second-half")
    resumed = shown(nb, "resumed")
    assert "hotswitch.json" in _value(r"^checkpoint: (.*)$", resumed), resumed
    half = spec["steps"] // 2
    assert _value(r"^4 ranks, auto, steps (\[.*\])$", resumed) == list(range(1, half + 1)), resumed
    assert _value(r"^2 ranks, steps (\[.*\]) under", resumed) == list(range(half + 1, spec["steps"] + 1)), resumed
    assert float(_one(r"two halves differs from one device by (\S+)$", resumed)) <= EXACT, "resumed, still exact"


def clusters(nb) -> None:
    assert "the job succeeded" in shown(nb, "across")
    where = shown(nb, "where")
    ranks = {int(r): node for r, node in re.findall(r"^rank (\d+): Ray node (\S+), local rank", where, re.M)}
    assert sorted(ranks) == [0, 1, 2, 3] and len(set(ranks.values())) == 2, "two ranks on each of two nodes"
    assert _value(r"^job.placement: (.*)$", where) == ranks, where
    plans = _value(r"^plans: (.*)$", where)
    assert plans[0][0][0].startswith("dp1tp4") and plans[-1] == [["dp4tp1pp1", 0]], "hot switching, then dp4"
    count, first_loss, last_loss = _one(r"^(\d+) steps, loss (\S+) -> (\S+)$", where)
    assert int(count) == source_value(nb, "across-launch", r'"steps": (\d+)') and float(last_loss) < float(first_loss)

    doomed = shown(nb, "doomed")
    killed = _one(r"^killing (rank \d+) ", doomed)
    reason = _one(r"^the job failed: (.*)$", doomed)
    assert killed in reason and "SIGKILL" in reason, doomed
    assert "ranks left running: none" in doomed, doomed

    planned = {
        algorithm: (float(ms), float(bound))
        for algorithm, ms, bound in re.findall(
            r"^(\w+)\s.* predicted\s+(\S+) ms \(bound (\S+) ms\)$", shown(nb, "your-cluster"), re.M
        )
    }
    assert all(ms >= bound for ms, bound in planned.values()), planned
    assert planned["balanced"][0] <= planned["greedy"][0], planned


def your_own_model(nb) -> None:
    mapping = re.findall(r"^  config.json (\w+)\s+(\S+)  ->  (\w+)\s+(\S+)$", shown(nb, "config"), re.M)
    assert len(mapping) >= 5 and all(float(theirs) == float(ours) for _, theirs, _, ours in mapping), mapping

    _succeeded(nb, "own", "own")
    steps = source_value(nb, "spec", r'"steps": (\d+)')
    every = source_value(nb, "spec", r'"eval_every": (\d+)')
    events = shown(nb, "own-events")
    assert len(_value(r"^learning rates: (.*)$", events)) == steps, events
    held_out = _value(r"^held-out loss: (.*)$", events)
    assert [step for step, _ in held_out] == list(range(every, steps + 1, every)), events
    assert held_out[-1][1] < held_out[0][1], "training lowered the held-out loss"

    board = shown(nb, "tensorboard")
    assert _value(r"^train/loss at steps (.*)$", board) == list(range(1, steps + 1)), "one point per step"
    assert _value(r"^eval/loss at steps (.*)$", board) == [step for step, _ in held_out], board

    export = shown(nb, "export")
    theirs, _, difference = _one(r"^transformers: (\S+), hotswitch: (\S+) \(relative difference (\S+)\)$", export)
    assert float(difference) <= EXACT, "transformers computes our loss on the export"
    assert float(theirs) < float(_one(r"^before training: (\S+)$", export)), export
    tokens = r"^its tokenizer: 512 tokens, the ids training saw: (\w+); generation ends at '(.*)' \(id \d+\)$"
    assert _one(tokens, export) == ("True", "</s>"), export

    _succeeded(nb, "moe", "moe")
    moe = shown(nb, "moe-plan")
    layouts = [Strategy.parse(s) for s, _ in _value(r"^buckets: (\[.*\]) \| instantiation", moe)]
    assert len(layouts) >= 2 and all(s.ep > 1 for s in layouts), "the plan switches between expert layouts"
    assert Strategy.parse(_one(r"\| instantiation: (\S+)$", moe)).ep == 1, "the master keeps every expert"
    trained = {Strategy.parse(s): int(t) for s, t in re.findall(r"^  (\S+)\s+(\d+) tokens$", moe, re.M)}
    assert set(trained) == set(layouts) and min(trained.values()) > 0, "each expert layout trained some tokens"
    steps, worst = _one(
        r"^(\d+) steps; the worst step's loss differs from one device by (\S+)$", shown(nb, "moe-exact")
    )
    assert int(steps) == source_value(nb, "moe-spec", r'"steps": (\d+)') and float(worst) <= EXACT, (steps, worst)


def at_paper_scale(nb) -> None:
    contenders = shown(nb, "contenders")
    memory = float(_one(r", (\d+) GiB each:", contenders))
    peaks = [float(p) for p in re.findall(r" peak\s+(\S+) GiB", contenders)]
    assert peaks and max(peaks) <= memory, "every contender that runs fits the device"

    speedup = shown(nb, "speedup")
    best, c1, auto = (float(s) for s in _one(r": (\S+) s; c1 (\S+) s; auto (\S+) s$", speedup))
    assert auto < best and auto <= c1, speedup

    added, predicted = _one(r"add up to (\S+) s; CostModel.step_s is (\S+) s$", shown(nb, "timeline"))
    assert added == predicted, "the timeline is the predicted step"

    grid = re.findall(r"^commoncrawl\s+(\d+): .*\((\S+)x\)$", shown(nb, "context-grid"), re.M)
    by_context = [float(gain) for _, gain in sorted(grid, key=lambda row: int(row[0]))]
    assert len(by_context) >= 2 and by_context[-1] > by_context[0], "more to gain at the longest context"

    worst, limit = _one(r"worst held-out point: (\S+)% off; the limit is (\S+)%$", shown(nb, "calibration"))
    assert float(worst) <= float(limit), "the calibration predicts the runs it was not fitted on"
    strong = [float(x) for x in re.findall(r"vs the strong static\s+(\S+)x$", shown(nb, "yardsticks"), re.M)]
    assert strong and all(x >= 1 for x in strong if x), "auto is never slower than the strong static"

    cp = shown(nb, "context-parallel")
    assert float(_one(r"^auto with cp\s+(\S+) s", cp)) <= float(_one(r"^auto without cp\s+(\S+) s", cp)), cp

    groups = shown(nb, "side-by-side")
    sequential = float(_one(r"^auto, sequential buckets\s+(\S+) s", groups))
    side_s, plan = _one(r"^auto with device groups\s+(\S+) s: (.*)  \(", groups)
    assert "@0-" in plan and float(side_s) <= sequential, groups  # here groups win, on the device model too
    floor = float(_one(r"^no plan over these layouts\s+(\S+) s: the floor", groups))
    assert 0 < floor < float(side_s), "no plan steps below the floor"

    moe = shown(nb, "moe-at-scale")
    statics = {
        ep: (float(seconds), Strategy.parse(name))
        for ep, seconds, name in re.findall(r"^best static (without ep|with ep)\s+(\S+) s: (\S+)$", moe, re.M)
    }
    assert statics["without ep"][1].ep == 1 and statics["with ep"][1].ep > 1, moe
    auto_s = float(_one(r"^auto\s+(\S+) s: ", moe))
    assert auto_s <= min(seconds for seconds, _ in statics.values()), "auto weighs both static layouts, and more"


def warm_ranks(nb) -> None:
    first, second = shown(nb, "first"), shown(nb, "second")
    trained = source_value(nb, "first-run", r"trainer\.train\((\d+), job\)")
    assert _value(r"^succeeded: steps (\[.*?\])", first) == list(range(1, trained + 1)), first
    first_lr = float(_one(r", lr (\S+)$", first))

    after = _ranks(shown(nb, "set-lr"))
    assert len(after) == 2 and {tuple(v) for v in after.values()} == {(trained, after[0][1])}, after
    more = source_value(nb, "second-run", r"trainer\.train\((\d+), job\)")
    assert _value(r"^succeeded: steps (\[.*?\])", second) == list(range(trained + 1, trained + more + 1)), second
    assert _value(r", lr (\[.*\])$", second) == [after[0][1]] != [first_lr], "the new learning rate held"
    assert _value(r"under (\[\[.*\]\]), lr", second) == [["dp1tp2pp1", 0]], "the tp2 the ranks switched to"
    processes = r"^on the processes (\{.*\})$"
    assert _value(processes, second) == _value(processes, first), "the same processes ran both cells"
    assert float(_one(r"over \d+ steps: (\S+)$", shown(nb, "same-run"))) <= EXACT, "one run, as on one device"

    norms = _ranks(shown(nb, "shard"))
    assert len(norms) == 2 and norms[0] != norms[1] and min(norms.values()) > 0, "two different halves of one weight"
    held_out = _ranks(shown(nb, "evaluate"))
    assert len(held_out) == 2 and held_out[0] == held_out[1], "the ranks agree on the held-out loss"
    first_loss = float(_one(r"training loss (\S+) at the first step", shown(nb, "held-out")))
    assert held_out[0] < first_loss, "the trained model does better on held-out documents"
    assert "idle" in shown(nb, "untouched"), "the refusal left the pool as it was"


CLAIMS = {
    "01-quickstart": quickstart,
    "02-inspect-plans": inspect_plans,
    "03-hot-switch-vs-static": hot_vs_static,
    "04-clusters": clusters,
    "05-your-own-model": your_own_model,
    "06-at-paper-scale": at_paper_scale,
    "07-warm-ranks": warm_ranks,
}
