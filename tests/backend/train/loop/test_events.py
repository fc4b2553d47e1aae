"""The event contract: declared once, enforced when built, and one definition of a run's figures."""

import pytest

from hotswitch.backend.train.loop.events import EVENTS, event
from hotswitch.backend.train.loop.run_totals import RunTotals, summarize


def step(n: int, tokens: int, total: float, switches: int = 0, predicted: float | None = None) -> dict:
    seconds = {"compute": total / 2, "switch": total / 4, "grad_sync": total / 8, "update": total / 8, "total": total}
    return event(
        "step",
        step=n,
        steps=4,
        tokens=tokens,
        padding=tokens // 10,
        sequences=2,
        loss=10.0 - n,
        grad_norm=1.0,
        seconds=seconds,
        tokens_per_s=tokens / total,
        strategies={
            "dp2": {"tokens": tokens, "padding": tokens // 10, "seconds": total / 2, "tokens_per_s": 2 * tokens / total}
        },
        switches=switches,
        compile_s=0.0,
        predicted_step_s=predicted,
        lr=1e-3,
    )


def test_an_event_with_an_undeclared_or_missing_field_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"undeclared fields \['colour'\]"):
        event("warning", message="m", colour="red")
    with pytest.raises(TypeError, match=r"missing fields \['path'\]"):
        event("checkpoint", step=3, format="hf")
    with pytest.raises(TypeError, match="unknown event type 'stpe'"):
        event("stpe", step=1)


def test_optional_fields_and_tags_are_declared():
    assert event("control", step=1, command="switch", strategy=[["tp2", 64], ["dp2", 0]])["strategy"][0] == ["tp2", 64]
    assert event("warning", message="m", run="hot switching")["run"] == "hot switching"
    kinds = {"data", "plan", "graphs", "step", "switch", "control", "checkpoint", "warning", "done", "statics", "eval"}
    kinds.add("profile")
    assert kinds == set(EVENTS)


def test_summarize_divides_the_measured_steps_tokens_by_their_step_seconds():
    events = [step(1, 100, 1.0, 3), step(2, 300, 2.0, 1, 1.5), step(3, 500, 3.0, 0, 2.5), event("warning", message="x")]
    every = summarize(events)
    assert every["steps"] == 3 and every["tokens"] == 900 and every["tokens_per_s"] == pytest.approx(900 / 6.0)
    assert every["padding"] == 10 + 30 + 50
    assert every["switches"] == 4 and every["split"]["compute"] == pytest.approx(3.0)
    assert every["predicted_step_s"] == pytest.approx(2.0) and every["measured_step_s"] == pytest.approx(2.0)
    assert every["strategies"]["dp2"]["tokens_per_s"] == pytest.approx(900 / 3.0)
    after = summarize(events, warmup=1)
    assert after["steps"] == 3 and after["measured_steps"] == 2 and after["tokens_per_s"] == pytest.approx(800 / 5.0)
    assert after["first_loss"] == 9.0 and after["last_loss"] == 7.0  # losses count every step


def test_the_held_out_loss_is_summed_up_first_and_last():
    evals = [event("eval", step=s, loss=loss, tokens=64, seconds=0.1) for s, loss in ((1, 6.5), (2, 6.0), (3, 5.5))]
    result = summarize([step(1, 100, 1.0), evals[0], step(2, 100, 1.0), evals[1], step(3, 100, 1.0), evals[2]])
    assert (result["first_eval_loss"], result["last_eval_loss"]) == (6.5, 5.5)
    assert summarize([step(1, 100, 1.0)])["last_eval_loss"] is None


def test_what_a_run_trains_on_is_summed_up_in_words():
    said = event("data", documents=57, source="train: 57 of 60 documents from 1 file(s)", tokenizer="byte", held_out=3)
    assert (
        summarize([said, step(1, 100, 1.0)])["data"]
        == "train: 57 of 60 documents from 1 file(s), byte tokens; 3 held out"
    )
    assert summarize([step(1, 100, 1.0)])["data"] is None


def test_a_run_shorter_than_its_warmup_is_measured_whole_and_folding_live_equals_replay():
    events = [step(1, 100, 1.0), step(2, 300, 2.0)]
    assert summarize(events, warmup=5)["tokens_per_s"] == pytest.approx(400 / 3.0)
    live = RunTotals(warmup=1)
    for e in events:
        live.add(e)
    assert live.summary() == summarize(events, warmup=1)
    assert summarize([])["tokens_per_s"] == 0.0 and summarize([])["steps"] == 0


def test_a_bodys_own_step_events_fold_without_failing():
    own = [{"type": "step", "step": 1, "sent": 1.5}, {"type": "step", "step": 2, "seconds": {"compute": 0.5}}]
    figures = summarize([*own, step(3, 100, 1.0)])
    assert figures["steps"] == 3 and figures["tokens"] == 100 and figures["seconds"] == pytest.approx(1.5)


def test_a_profile_event_reads_as_a_line_of_its_own():
    from hotswitch.backend.train.loop.events import NOTICES, event, notice

    profiling = event("profile", measuring="tp2@0-1 + dp2@2-3", index=2, of=5, lengths=[128, 512, 2048])
    assert profiling["type"] in NOTICES
    assert notice(profiling) == "profiling tp2@0-1 + dp2@2-3 (2 of 5) at 3 lengths up to 2,048 tokens, to plan"
