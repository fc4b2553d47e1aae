"""Resuming never unpickles a checkpoint that could run code: a crafted DCP ``.metadata`` or a
folder others can write is refused before DCP reads it; a checkpoint save() wrote passes."""

import os
import pickle
import shutil

import pytest

from hotswitch.backend.runtime.spawn import RankError, spawn_ranks
from hotswitch.backend.train.state.checkpoint_safety import (
    UnsafeCheckpointError,
    check_checkpoint_safe,
    pickle_globals,
    protect_checkpoint,
)

from ..train_workers import resumed_run, save_twice


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A real checkpoint written by checkpoint.save on two ranks."""
    path = tmp_path_factory.mktemp("saved") / "ckpt"
    spawn_ranks(save_twice, 2, str(path))
    return path


def _copy(saved, tmp_path):
    path = tmp_path / "ckpt"
    shutil.copytree(saved, path)
    return path


def test_a_checkpoint_save_wrote_references_only_dcp_classes_and_passes(saved):
    check_checkpoint_safe(saved)
    modules = {module for module, _ in pickle_globals((saved / ".metadata").read_bytes())}
    assert "torch.distributed.checkpoint.metadata" in modules
    assert modules <= {"torch", "torch.distributed.checkpoint.metadata", "torch.distributed.checkpoint.filesystem",
                       "torch.serialization", "pathlib"}  # fmt: skip


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_a_crafted_metadata_is_refused_and_its_payload_never_runs(saved, tmp_path, protocol):
    path = _copy(saved, tmp_path)
    marker = tmp_path / "payload-ran"
    (path / ".metadata").write_bytes(pickle.dumps(Payload(marker), protocol=protocol))
    with pytest.raises(UnsafeCheckpointError, match=r"references (posix|os)\.system, which DCP never writes"):
        check_checkpoint_safe(path)
    assert not marker.exists()


def test_resuming_from_a_crafted_checkpoint_fails_on_every_rank_before_dcp_loads(saved, tmp_path):
    path = _copy(saved, tmp_path)
    marker = tmp_path / "payload-ran"
    (path / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(RankError, match=r"refusing to resume from .*ckpt: .*system, which DCP never writes"):
        spawn_ranks(resumed_run, 2, 1, "dp2", str(path))
    assert not marker.exists()


def test_a_group_writable_file_or_folder_and_a_foreign_link_are_refused(saved, tmp_path):
    path = _copy(saved, tmp_path)
    os.chmod(path / "__0_0.distcp", 0o664)
    with pytest.raises(UnsafeCheckpointError, match=r"__0_0\.distcp is writable by group or others .*chmod -R go-w"):
        check_checkpoint_safe(path)
    os.chmod(path / "__0_0.distcp", 0o644)
    os.chmod(path, 0o757)
    with pytest.raises(UnsafeCheckpointError, match=r"ckpt is writable by group or others"):
        check_checkpoint_safe(path)
    os.chmod(path, 0o775)
    os.chmod(path / ".metadata", 0o666)
    protect_checkpoint(path)  # what a save under umask 002 needs
    check_checkpoint_safe(path)
    assert (path / ".metadata").stat().st_mode & 0o777 == 0o644
    (path / "__1_0.distcp").unlink()
    (path / "__1_0.distcp").symlink_to(saved / "__1_0.distcp")
    with pytest.raises(UnsafeCheckpointError, match=r"__1_0\.distcp is a symbolic link"):
        check_checkpoint_safe(path)


def test_a_global_named_at_run_time_or_no_pickle_at_all_is_refused(tmp_path):
    # STACK_GLOBAL whose module string comes from a dict lookup, not a literal
    sneaky = b"\x80\x04}\x94\x8c\x01m\x94\x8c\x02os\x94s\x8c\x01m\x94\x85\x94R\x8c\x06system\x94\x93\x94."
    with pytest.raises(UnsafeCheckpointError, match="builds a global's name at run time"):
        pickle_globals(sneaky)
    path = tmp_path / "ckpt"
    path.mkdir()
    (path / ".metadata").write_bytes(b"not a pickle")
    with pytest.raises(UnsafeCheckpointError, match=r"\.metadata is not a readable pickle"):
        check_checkpoint_safe(path)
