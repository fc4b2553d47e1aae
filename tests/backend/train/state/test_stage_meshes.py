"""The stage meshes that checkpoints place DTensors on: DCP reshards parameters saved under one
strategy into another's layout exactly, cp strategies included, and ``as_dtensor`` refuses a
mesh that lacks one of the (dp, cp, tp) dims, naming the fix."""

import pytest
import torch

from hotswitch.backend import Strategy, get_config, param_layout
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.runtime.spawn import spawn_ranks

PAIRS = [("tp2", "cp2"), ("cp2", "pp2"), ("pp2", "dp2tp1")]


def _reshard(rank, world, ckpt_root):
    """For each pair: save under the source layout, load into the destination's; the names whose
    loaded block differs from the global tensor's. Then what a mesh without cp is told."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from hotswitch.backend.train.state.checkpoint import as_dtensor, stage_meshes

    config = get_config("tiny").with_(n_layers=2)
    gen = torch.Generator().manual_seed(0)
    truth = {name: torch.randn(shape, generator=gen) for name, shape in config.param_shapes().items()}
    wrong = {}
    for i, (src_name, dst_name) in enumerate(PAIRS):
        states = {}
        for s in (Strategy.parse(src_name), Strategy.parse(dst_name)):
            layout, meshes = param_layout(config, s), stage_meshes(s, "cpu")
            buffer = FlatBuffer(layout, rank)
            views = {n: as_dtensor(v, meshes[layout[n].stage], layout[n]) for n, v in buffer.views.items()}
            states[s] = (buffer, views)
        (src, src_views), (dst, dst_views) = states.values()
        src.load_global(truth)
        dcp.save(src_views, checkpoint_id=f"{ckpt_root}/{i}")
        dcp.load(dst_views, checkpoint_id=f"{ckpt_root}/{i}")
        wrong[f"{src_name}->{dst_name}"] = [
            n for n, v in dst.views.items() if not torch.equal(v, truth[n][dst.boxes[n].slices()])
        ]
        dist.barrier()
    return {"wrong": wrong, "flat_mesh_error": _flat_mesh_error(rank)}


def _flat_mesh_error(rank):
    """What ``as_dtensor`` says of a (dp, tp) mesh, the shape before cp joined the stage mesh."""
    from torch.distributed.device_mesh import DeviceMesh

    from hotswitch.backend.train.state.checkpoint import as_dtensor

    strategy = Strategy.parse("tp2")
    layout = param_layout(get_config("tiny"), strategy)
    name = next(iter(layout))
    mesh = DeviceMesh("cpu", torch.tensor(strategy.stage_ranks[0]).view(strategy.dp, strategy.tp))
    try:
        as_dtensor(FlatBuffer(layout, rank).views[name], mesh, layout[name])
    except ValueError as error:
        return str(error)
    return None


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return spawn_ranks(_reshard, 2, str(tmp_path_factory.mktemp("dcp")))


def test_parameters_reshard_exactly_between_the_stage_meshes_of_two_strategies(ranks):
    assert [r["wrong"] for r in ranks] == [{f"{a}->{b}": [] for a, b in PAIRS}] * 2


def test_a_mesh_without_the_cp_dim_is_refused_naming_the_stage_meshes(ranks):
    messages = [r["flat_mesh_error"] for r in ranks]
    assert messages[0] == messages[1]
    assert messages[0] is not None
    assert "(1, 2)" in messages[0]
    assert "stage_meshes(strategy)" in messages[0]
