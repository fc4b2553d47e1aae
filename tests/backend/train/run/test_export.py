"""A run's Hugging Face export is written whole or not at all."""

import pytest
import torch
from safetensors.torch import load_file

from hotswitch.backend.data.tokenizer import BYTES
from hotswitch.backend.models.config import get_config
from hotswitch.backend.models.llama import Transformer
from hotswitch.backend.train.run import export


def test_an_export_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    config = get_config("tiny")
    params = dict(Transformer(config).named_parameters())
    out = tmp_path / "out"

    def killed(directory):
        raise KeyboardInterrupt  # the run stopped while the weights were on disk, before the tokenizer

    monkeypatch.setattr(BYTES, "save_hf", killed)
    with pytest.raises(KeyboardInterrupt):
        export.write_checkpoint(out, config, params, BYTES, None)
    assert not out.exists()  # no folder that looks like a checkpoint, and the path stays free
    monkeypatch.undo()
    export.write_checkpoint(out, config, params, BYTES, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # the earlier attempt's leftovers gone
    assert {p.name for p in out.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert torch.equal(load_file(out / "model.safetensors")["model.norm.weight"], params["norm.weight"].detach())
