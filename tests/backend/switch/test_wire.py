"""Zero-copy runs: which slices can travel straight from and into the flat buffers."""

from hotswitch.backend import Cluster, Strategy, get_config, param_layout, plan_switch
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.switch.wire import MIN_RUN_ELEMENTS, WireLayout


def test_wires_cover_each_message_once_and_runs_are_contiguous():
    config = get_config("125m").with_(n_layers=2)
    src, dst = param_layout(config, Strategy.parse("tp2pp2")), param_layout(config, Strategy.parse("dp4"))
    plan = plan_switch(src, dst, Cluster.local(4))
    wires = WireLayout(src, dst)
    direct = 0
    for message in plan.messages:
        split = wires.wires(message)
        carried = [t for w in split for t in w.transfers]
        assert len(carried) == len(message.transfers) and set(carried) == set(message.transfers)
        buffers = FlatBuffer(src, message.sender), FlatBuffer(dst, message.receiver)
        for wire in split:
            for start, buffer in ((wire.src_start, buffers[0]), (wire.dst_start, buffers[1])):
                if start is None:
                    continue
                direct += 1
                assert wire.numel >= MIN_RUN_ELEMENTS
                offset = start
                for t in wire.transfers:
                    view = buffer.region(t.name, t.box)
                    assert view.is_contiguous() and view.storage_offset() == offset
                    offset += t.box.numel
    assert direct > 0


def test_accumulated_slices_are_never_received_in_place():
    from hotswitch.backend.layout import partial_over_replicas

    config = get_config("tiny")
    src = partial_over_replicas(param_layout(config, Strategy.parse("dp4")))
    dst = param_layout(config, Strategy.parse("dp4"))
    plan = plan_switch(src, dst, Cluster.local(4))
    wires = WireLayout(src, dst)
    assert all(w.dst_start is None for m in plan.messages for w in wires.wires(m))
