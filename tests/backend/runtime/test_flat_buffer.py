"""Flat buffers: where a block lies contiguously inside a rank's buffer."""

from hotswitch.backend import Box, Strategy, get_config, param_layout
from hotswitch.backend.runtime.flat_buffer import FlatBuffer, span_in


def test_span_in_finds_contiguous_blocks_only():
    block = Box((10, 0, 0), (4, 3, 5))
    assert span_in(Box((11, 0, 0), (2, 3, 5)), block, 100) == 100 + 15
    assert span_in(Box((12, 1, 0), (1, 2, 5)), block, 0) == 2 * 15 + 5
    assert span_in(Box((12, 1, 2), (1, 1, 3)), block, 0) == 2 * 15 + 5 + 2
    assert span_in(Box((10, 0, 0), (2, 2, 5)), block, 0) is None  # rows with a gap between them
    assert span_in(Box((10, 0, 0), (4, 3, 2)), block, 0) is None  # a column block


def test_span_in_agrees_with_torch_views():
    layout = param_layout(get_config("tiny"), Strategy.parse("dp2tp2"))
    buffer = FlatBuffer(layout, 1)
    for name, box in buffer.boxes.items():
        for piece in (box, Box(box.offset, (1, *box.shape[1:]))):
            view = buffer.region(name, piece)
            start = span_in(piece, box, buffer.views[name].storage_offset())
            assert start == view.storage_offset() and view.is_contiguous()
