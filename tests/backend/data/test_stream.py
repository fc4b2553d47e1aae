"""The batch stream: deterministic given its seed, resumable from its state."""

import json

from hotswitch.backend.data import BatchStream, stdlib_documents


def test_stream_is_deterministic_and_resumes_exactly():
    first = BatchStream(stdlib_documents(), 8, 128, seed=3)
    batches = [first.next_batch() for _ in range(3)]
    assert all(1 <= s.length <= 128 for b in batches for s in b)
    resumed = BatchStream(stdlib_documents(), 8, 128, seed=3)
    resumed.next_batch()
    state = resumed.state_dict()
    again = BatchStream(stdlib_documents(), 8, 128, seed=3)
    again.load_state_dict(json.loads(json.dumps(state)))
    assert [again.next_batch(), again.next_batch()] == batches[1:]
    assert BatchStream(stdlib_documents(), 8, 128, seed=4).next_batch() != batches[0]
