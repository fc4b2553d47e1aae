"""A checkpoint command that cannot be carried out is a ``warning`` event; training goes on."""

import os

from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.run.recipe import build


def train_with_checkpoint_commands(rank: int, world: int, paths: list[str]):
    """Three steps of a small run; before the first, a checkpoint command for each of ``paths``."""
    commands = [[{"command": "checkpoint", "path": p} for p in paths]]
    events = []
    trainer, s = build(
        {"steps": 3, "plan": "dp2", "max_len": 64, "batch_size": 4, "token_budget": 256},
        events.append,
        lambda: commands.pop(0) if commands else [],
    )
    done = trainer.train(s["steps"])
    return done, [e for e in events if e["type"] in ("warning", "control", "checkpoint")]


def test_failed_checkpoint_commands_become_warnings_and_training_finishes(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    blocker.chmod(0o755)  # passes the writability check, so the write itself fails (on every rank)
    plain = tmp_path / "plain"
    plain.write_text("not a folder either")
    (tmp_path / "taken").mkdir()
    paths = [str(blocker / "sub" / "ckpt"), str(plain / "ckpt"), str(tmp_path / "taken"), str(tmp_path / "good")]
    done, events = spawn_ranks(train_with_checkpoint_commands, 2, paths)[0]
    assert done["reason"] == "finished" and done["step"] == 3
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert len(warnings) == 3, warnings
    assert all("not applied" in w for w in warnings)
    # the write itself failed on both ranks: the cause, the file and the ranks, not DCP's wrapper
    assert "CheckpointException" not in warnings[0]
    assert f"writing checkpoint {blocker / 'sub' / 'ckpt'} failed: ranks 0, 1: Not a directory (ENOTDIR)" in warnings[0]
    assert str(blocker) in warnings[0].split("ENOTDIR")[1]
    assert "is not writable" in warnings[1] and "already exists" in warnings[2]
    assert [e["path"] for e in events if e["type"] == "checkpoint"] == [str(tmp_path / "good")]
    assert os.path.isfile(tmp_path / "good" / "hotswitch.json")
