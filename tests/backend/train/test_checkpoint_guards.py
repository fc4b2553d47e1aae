import pytest

from hotswitch.backend import get_config
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.train.checkpoint import CheckpointError, read_meta

from .train_workers import save_twice


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
