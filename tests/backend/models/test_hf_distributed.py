"""Distributed training starts from a Hugging Face checkpoint: each rank reads only its own
box of each tensor, and together they hold exactly the checkpoint's weights."""

import pytest
import torch

from hotswitch.backend.models.hf import load_pretrained
from hotswitch.backend.runtime.spawn import spawn_ranks

from .hf_fixtures import make_checkpoint, tokens, transformers_loss
from .hf_workers import engine_from_checkpoint


@pytest.mark.slow
def test_a_dp2tp2_engine_holds_the_checkpoints_weights_reading_only_its_boxes(tmp_path):
    reference = make_checkpoint(tmp_path, max_shard_size="40KB")
    ids = tokens(batch=4)
    results = spawn_ranks(engine_from_checkpoint, 4, str(tmp_path), "dp2tp2", ids.tolist())
    expected = load_pretrained(tmp_path).state_dict()

    params = results[0][0]
    assert params.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(params[name], tensor), name

    for rank, (_, reads, boxes, _) in enumerate(results):
        assert all(box is not None for _, box in reads), f"rank {rank} read a whole tensor"
        assert dict(reads) == boxes, f"rank {rank} read other boxes than its own"
        assert len(reads) == len(boxes)
        sharded = [n for n, b in boxes.items() if b.shape != tuple(expected[n].shape)]
        assert len(sharded) == 2 + 2 * 7, "every matrix is split over tp=2, norms are not"

    losses = {r[3] for r in results}
    assert len(losses) == 1
    assert losses.pop() == pytest.approx(transformers_loss(reference, ids), rel=1e-5)
