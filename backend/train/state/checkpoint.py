"""Checkpoints with ``torch.distributed.checkpoint``: model, optimizer, data position, step.

Parameters and AdamW moments are saved as DTensors of the instantiation layout, so a
run can resume under another strategy set or world size: DCP reshards on load. A
checkpoint is written into a temporary folder that is renamed into place only once
complete; an existing checkpoint is never overwritten.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from hotswitch.backend.dist_state import Shard
from hotswitch.backend.layout import MESH_DIMS, mesh_shape
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.runtime.flat_buffer import FlatBuffer
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.state.checkpoint_errors import explain
from hotswitch.backend.train.state.checkpoint_safety import check_checkpoint_safe, protect_checkpoint
from hotswitch.backend.train.state.master import ADAM_MOMENTS, OptimizerState

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor

# torch.distributed.checkpoint and DTensor are imported where a checkpoint is written or read: they
# cost every rank 1-6 s of CPU at start (40% of importing torch), and most jobs never checkpoint

META = "hotswitch.json"


class CheckpointError(ValueError):
    pass


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    step = 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def stage_meshes(strategy: Strategy, device_type: str) -> list[DeviceMesh]:
    """One (dp, cp, tp) device mesh per pipeline stage of ``strategy``, the mesh its layouts'
    placements refer to (collective: every rank creates every mesh)."""
    from torch.distributed.device_mesh import DeviceMesh

    return [DeviceMesh(device_type, torch.tensor(ranks).view(mesh_shape(strategy))) for ranks in strategy.stage_ranks]


def as_dtensor(local: torch.Tensor, mesh: DeviceMesh, layout) -> DTensor:
    """``local`` (this rank's block of a ``ParamLayout``) as a DTensor over ``mesh``, sharing storage.
    ``mesh`` must be the layout's stage mesh from ``stage_meshes``: one dim per placement."""
    if mesh.ndim != len(layout.state.placements):
        raise ValueError(
            f"a mesh of shape {tuple(mesh.shape)} for a layout placed {layout.state.placements} over "
            f"{MESH_DIMS}: one mesh dim per placement is needed; build the mesh with stage_meshes(strategy)"
        )
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor import Replicate as DReplicate
    from torch.distributed.tensor import Shard as DShard

    placements = [DShard(p.dim) if isinstance(p, Shard) else DReplicate() for p in layout.state.placements]
    shape = tuple(layout.shape)
    return DTensor.from_local(local, mesh, placements, run_check=False, shape=torch.Size(shape), stride=_strides(shape))


def _dtensor_state(engine: Engine, meshes: list[DeviceMesh], weights: FlatBuffer) -> dict:
    """The master ``weights`` and AdamW moments as DTensors of the instantiation layout, sharing
    storage with them (the engine's own, or copies gathered from a sharded optimizer)."""
    layouts = engine.master.state.layout
    optimizer = engine.master.optimizer_state()
    out: dict[str, torch.Tensor] = {}
    for name, view in weights.views.items():  # fp32 master weights in every precision
        layout = layouts[name]
        mesh = meshes[layout.stage]
        out[f"model/{name}"] = as_dtensor(view, mesh, layout)
        for key, moment in optimizer.moments[name].items():
            out[f"optim/{name}/{key}"] = as_dtensor(moment, mesh, layout)
    out["optim/step"] = torch.tensor(optimizer.step)
    return out


def _meshes(engine: Engine) -> list[DeviceMesh]:
    """The instantiation strategy's stage meshes (collective)."""
    return stage_meshes(engine.instantiation, engine.device.type)


def save(engine: Engine, path: str | Path, extra: dict) -> Path:
    """Write the checkpoint (collective). Raises before writing if ``path`` exists."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    path = Path(path)
    exists = torch.tensor([int(path.exists())])
    dist.broadcast(exists, 0)
    if exists.item():
        raise CheckpointError(f"{path} already exists; choose a new checkpoint path (nothing was overwritten)")
    staging = path.with_name(f".{path.name}.partial")
    if dist.get_rank() == 0:
        shutil.rmtree(staging, ignore_errors=True)
    dist.barrier()
    try:
        dcp.save(_dtensor_state(engine, _meshes(engine), engine.master.master_weights()), checkpoint_id=str(staging))
    except CheckpointException as error:  # every rank has every rank's failures: all raise alike
        # the causes name the folder being written; the user gave (and knows) the checkpoint's path
        raise CheckpointError(explain(error, "writing", path).replace(str(staging), str(path))) from None
    if dist.get_rank() == 0:
        meta = {"config": asdict(engine.config), "instantiation": str(engine.instantiation), **extra}
        (staging / META).write_text(json.dumps(meta, indent=1))
        protect_checkpoint(staging)  # resume refuses checkpoints others could have rewritten
        os.replace(staging, path)
    dist.barrier()
    return path


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=asdict))


def _defaults() -> dict[str, object]:
    out: dict[str, object] = {}
    for f in fields(ModelConfig):
        if f.default is not MISSING:
            out[f.name] = f.default
        elif f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
    return out


def read_meta(path: str | Path, config: ModelConfig) -> dict:
    """The checkpoint's metadata, after checking it holds ``config``'s model."""
    meta_file = Path(path) / META
    if not meta_file.is_file():
        raise CheckpointError(f"{path} is not a hotswitch checkpoint (no {META}); give a folder written by save()")
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(
            f"{meta_file} cannot be read ({error}); the checkpoint is damaged, give another one"
        ) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise CheckpointError(f"{meta_file} holds no model config; the checkpoint is damaged, give another")
    ours = _as_json(asdict(config))  # as it was written: tuples as lists, options as dicts
    # a field added to ModelConfig since the checkpoint was written reads as its default
    saved = _as_json({**_defaults(), **meta["config"]})
    if saved != ours:
        diff = {
            k: (saved.get(k), ours.get(k)) for k in sorted(saved.keys() | ours.keys()) if saved.get(k) != ours.get(k)
        }
        raise CheckpointError(f"{path} holds another model: (checkpoint, this run) differ in {diff}")
    return meta


def load(engine: Engine, path: str | Path) -> None:
    """Load model and optimizer into the engine's instantiation layout (collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    check_checkpoint_safe(path)  # DCP unpickles .metadata: refuse one that could run code
    weights = engine.master.master_weights()
    state = _dtensor_state(engine, _meshes(engine), weights)
    try:
        dcp.load(state, checkpoint_id=str(path))
    except CheckpointException as error:
        raise CheckpointError(explain(error, "reading", path)) from None
    moments = {name: {key: state[f"optim/{name}/{key}"].to_local() for key in ADAM_MOMENTS} for name in weights.views}
    engine.master.load_weights(weights)
    engine.master.load_optimizer_state(OptimizerState(float(state["optim/step"]), moments))
    engine.master.refresh()  # the bf16 copy strategies compute with, from the loaded weights
