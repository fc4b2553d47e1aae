import pytest

from hotswitch.backend import Box, DistState, Partial, Replicate, Shard


def test_local_boxes_tile_the_tensor_under_nested_shards():
    # mesh 2x2, both dims shard tensor dim 0: the second mesh dim splits the first one's chunk
    state = DistState((0, 1, 2, 3), (2, 2), (Shard(0), Shard(0)))
    boxes = [state.local_box(r, (8, 3)) for r in range(4)]
    assert [b.offset for b in boxes] == [(0, 0), (2, 0), (4, 0), (6, 0)]
    assert all(b.shape == (2, 3) for b in boxes)


def test_replicate_and_shard_on_two_dims():
    state = DistState((4, 5, 6, 7), (2, 2), (Replicate(), Shard(1)))
    assert state.local_box(4, (6, 8)) == Box((0, 0), (6, 4))
    assert state.local_box(5, (6, 8)) == Box((0, 4), (6, 4))
    assert state.local_box(6, (6, 8)) == state.local_box(4, (6, 8))
    assert not state.holds(0)


def test_partial_index():
    state = DistState((0, 1, 2, 3), (2, 2), (Partial(), Shard(0)))
    assert [state.partial_index(r) for r in range(4)] == [0, 0, 1, 1]
    assert state.partial_count == 2


def test_check_names_tensor_dim_and_fix():
    state = DistState((0, 1, 2), (3,), (Shard(1),))
    with pytest.raises(ValueError, match=r"w: dim 1 of size 8 cannot be split evenly into 3.*divides 8"):
        state.check((4, 8), "w")


def test_box_intersection():
    a, b = Box((0, 0), (4, 4)), Box((2, 3), (4, 4))
    assert a.intersect(b) == Box((2, 3), (2, 1))
    assert a.intersect(Box((4, 0), (1, 1))) is None


def test_mesh_and_devices_must_agree():
    with pytest.raises(ValueError, match="distinct devices"):
        DistState((0, 0), (2,), (Replicate(),))
