"""The held-out batches: each held-out document once, however the batch size falls."""

import pytest

from hotswitch.backend.data import BatchStream
from hotswitch.backend.train.loop.evaluation import Evaluation
from tests.backend.data.test_stream import Counting


@pytest.mark.parametrize("batch_size", [1, 2, 3, 4])
def test_a_split_smaller_than_its_batches_is_evaluated_once_over(batch_size):
    evaluation = Evaluation(BatchStream(Counting([5, 9]), batch_size, 8, seed=1), every=1, batches=2)
    docs = sorted(s.doc for batch in evaluation.batches for s in batch)
    assert docs == [0, 1]  # drawn again, one of the two would count twice at batch sizes 3 and 4
    assert all(0 < len(batch) <= batch_size for batch in evaluation.batches)


def test_a_split_that_trains_nothing_is_named():
    with pytest.raises(ValueError, match=r"the held-out documents \(eval_data, or the eval_fraction split\): no doc"):
        Evaluation(BatchStream(Counting([1]), 2, 8), every=1)
