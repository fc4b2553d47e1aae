import pytest

from hotswitch.backend import get_config
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.state.checkpoint import CheckpointError, read_meta

from ..train_workers import checkpointed_run, resume_error, save_twice


def test_an_existing_checkpoint_is_never_overwritten_and_another_model_is_refused(tmp_path):
    path = tmp_path / "ckpt"
    messages = spawn_ranks(save_twice, 2, str(path))
    assert all("already exists; choose a new checkpoint path (nothing was overwritten)" in m for m in messages)
    meta = read_meta(path, get_config("tiny"))
    assert meta["step"] == 0 and meta["instantiation"] == "dp2tp1pp1"
    assert not list(tmp_path.glob(".*partial"))
    with pytest.raises(CheckpointError, match=r"holds another model: .*'dim': \(64, 96\)"):
        read_meta(path, get_config("tiny").with_(dim=96))
    with pytest.raises(CheckpointError, match="is not a hotswitch checkpoint"):
        read_meta(tmp_path, get_config("tiny"))


def test_a_truncated_shard_is_named_with_the_bytes_it_lacks(tmp_path):
    path = tmp_path / "ckpt"
    spawn_ranks(checkpointed_run, 2, 1, "dp2", str(path))
    shard = sorted(path.glob("*.distcp"))[-1]
    whole = shard.read_bytes()
    shard.write_bytes(whole[: len(whole) // 2])
    messages = spawn_ranks(resume_error, 2, "dp2", str(path))
    expected = f"{shard}: expected {len(whole)} bytes, found {len(whole) // 2} (truncated)"
    assert all(m.startswith("CheckpointError: reading checkpoint") and expected in m for m in messages), messages
    shard.unlink()
    messages = spawn_ranks(resume_error, 2, "dp2", str(path))
    assert all(f"{shard} is missing (expected {len(whole)} bytes)" in m for m in messages), messages
