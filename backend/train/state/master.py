"""The master weights: the instantiation strategy's parameters, AdamW over them, and the
update that ends every step. Other strategies only ever hold copies and accumulate gradients;
this is the one place weights change."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.profiler import record_function

from hotswitch.backend.dist_state import Box, Replicate
from hotswitch.backend.layout import is_frozen, tp_placement
from hotswitch.backend.models.llama import init_param
from hotswitch.backend.precision import FP32, Precision
from hotswitch.backend.runtime.flat_buffer import FlatBuffer, flat_offsets
from hotswitch.backend.runtime.profile_ranges import UPDATE
from hotswitch.backend.train.loop.strategy_state import StrategyState
from hotswitch.backend.train.state.fused_update import FusedUpdate
from hotswitch.backend.train.state.optim import OptimizerConfig
from hotswitch.backend.train.state.optimizer_shard import DataParallelShard

ADAM_MOMENTS = ("exp_avg", "exp_avg_sq")
PART = "part"  # the one AdamW parameter of a sharded master: this replica's part of the flat buffer


@dataclass(frozen=True)
class OptimizerState:
    """AdamW's state on one rank: the step count and, per parameter of the master layout, this
    rank's box of ``exp_avg`` and ``exp_avg_sq`` (zeros before the first update)."""

    step: float
    moments: dict[str, dict[str, torch.Tensor]]


InitialValue = Callable[[str, tuple[int, ...], Box], torch.Tensor]
"""``initial(name, full_shape, box)``: this rank's ``box`` of parameter ``name``'s initial value
(e.g. ``models.hf.hf_initializer(dir)``, which reads only that box of a checkpoint)."""


class Master:
    """``state``'s parameters initialised from ``seed`` (the same values as one device's model),
    or by ``initial`` when given, as AdamW parameters.

    In fp32 the master weights are ``state``'s own parameter buffer and their gradients its
    gradient buffer. In mixed precision (``precision.mixed``) the master weights are a separate
    fp32 buffer in ``state``'s layout: ``state`` computes with a bf16 copy, refreshed after every
    update, and the update reads its gradient buffer (cast to fp32 first when gradients
    accumulate in bf16).

    With ``shard`` (the default) and more than one replica (dp x cp: context-parallel ranks hold
    the same weights, so they share the update as in Megatron's distributed optimizer), each
    replica keeps the fp32 master weights and AdamW's moments of its own part of the flat buffer
    only (``DataParallelShard``, reached through ``dp_group``, the replica group) and gathers
    the updated parameters.

    With ``fused`` (a run with ``compile`` on), the clip, AdamW and the compute copy's refresh
    run as one compiled kernel over the flat buffers (``FusedUpdate``); AdamW's state stays in
    ``optimizer`` as the eager update keeps it."""

    def __init__(
        self,
        state: StrategyState,
        optim: OptimizerConfig,
        seed: int,
        rank: int,
        initial: InitialValue | None = None,
        precision: Precision = FP32,
        dp_group: Callable[[], object] | None = None,
        shard: bool = True,
        fused: bool = False,
    ):
        self.state = state
        self.optim = optim
        self.rank = rank
        self.precision = precision
        device = state.params.flat.device
        full = FlatBuffer(state.layout, rank, device=device) if precision.mixed else state.params
        grads = state.grads
        if grads.flat.dtype != torch.float32:
            grads = FlatBuffer(state.layout, rank, device=device)
        self.grads = grads
        with torch.no_grad():
            for name, box in full.boxes.items():
                shape = state.layout[name].shape
                value = init_param(name, shape, seed)[box.slices()] if initial is None else initial(name, shape, box)
                full.views[name].copy_(value)
            if full is not state.params:
                state.params.flat.copy_(full.flat)
        strategy = state.strategy
        sharded = shard and strategy.replicas > 1
        replica = strategy.replica_index(rank)
        self.shard = (
            DataParallelShard(full.flat.numel(), strategy.replicas, replica, dp_group)
            if sharded and dp_group is not None
            else None
        )
        if self.shard is None:
            self.weights: FlatBuffer | None = full
            self.params = {n: nn.Parameter(view) for n, view in full.views.items()}
            for name, param in self.params.items():
                param.grad = self.grads.views[name]
        else:  # one parameter: this replica's part (AdamW is element-wise)
            part = self.shard.part(full.flat)
            self.weights = None
            self.params = {PART: nn.Parameter(part.clone() if precision.mixed else part)}
            self.params[PART].grad = self.shard.part(self.grads.flat)
        self.optimizer = optim.adamw(list(self.params.values()))
        self.updates = 0  # the learning-rate schedule's position
        self.fused = self._fused_update(full) if fused else None

    def _fused_update(self, full: FlatBuffer) -> FusedUpdate:
        """The one-kernel update of this master's flat buffers: the whole box, or this replica's part."""
        params = list(self.params.values())
        if self.shard is None:
            copy = None if full is self.state.params else self.state.params.flat
            return FusedUpdate(self.optimizer, params, full.flat, self.grads.flat, self.optim, copy)
        return FusedUpdate(self.optimizer, params, params[0].detach(), self.shard.part(self.grads.flat), self.optim)

    @property
    def sharded(self) -> bool:
        return self.shard is not None

    def _unsharded_weights(self) -> FlatBuffer:
        """The fp32 master weights of an unsharded master (a sharded one holds only its part)."""
        assert self.weights is not None, "a sharded master has no whole weights buffer"
        return self.weights

    @torch.no_grad()
    def refresh(self) -> None:
        """Make the strategy's compute copy equal the master weights (cast): after an update,
        and after weights were loaded (a no-op in fp32 unsharded, where they are one buffer;
        sharded, every replica's updated part is gathered: collective over the replicas)."""
        if self.shard is not None:
            self.shard.gather_into(self.params[PART].detach(), self.state.params.flat)
        elif self.weights is not self.state.params:
            self.state.params.flat.copy_(self._unsharded_weights().flat)

    def _counts_once(self, name: str) -> bool:
        """Whether this rank's box of ``name`` is the one counted in a global sum: replicas
        (dp x cp) hold copies, and tp replicas of replicated weights (norms) too."""
        strategy = self.state.strategy
        replicated = tp_placement(self.state.layout[name].state) == Replicate()
        return strategy.replica_index(self.rank) == 0 and (strategy.coords(self.rank).tp == 0 or not replicated)

    def grad_norm(self) -> float:
        """The global L2 norm of the accumulated gradients (collective), every element once.

        Each tensor's norm is taken in fp32 (one fused kernel over all of them on a GPU, no
        fp64 copy of the gradients); only the per-tensor norms are squared and summed in
        fp64, so the sum over hundreds of tensors and over ranks loses nothing."""
        return self.norm_tensor().item()

    def norm_tensor(self) -> torch.Tensor:
        """``grad_norm`` as a 0-d fp64 tensor on the gradients' device (collective)."""
        self._take_grads()
        grads = self.grads
        counted = [grad for name, grad in grads.views.items() if self._counts_once(name)]
        squares = torch.zeros((), dtype=torch.float64, device=grads.flat.device)
        if counted:
            squares += torch.stack(torch._foreach_norm(counted, 2)).double().pow(2).sum()
        dist.all_reduce(squares)
        return squares.sqrt()

    def clip_and_update(self) -> float:
        """Clip the gradients to ``max_grad_norm`` over every rank and step AdamW (collective);
        the norm before clipping. Gradients within the norm are left as they are rather than
        multiplied by 1 (as Megatron does): the same values, one pass over them fewer. Fused,
        the kernel reads them times the clip factor and leaves the buffer as it was."""
        with record_function(UPDATE):
            self.updates += 1
            kept = self._frozen_values()
            if self.fused is not None:  # clip, AdamW and the compute copy in one kernel
                on_device = self.norm_tensor()
                self.fused.step(self.updates, on_device)
                self._restore_frozen(kept, into_copy=self.fused.copy is not None)
                if self.fused.copy is None:
                    self.refresh()
                return on_device.item()
            norm = self.grad_norm()
            clip = self.optim.max_grad_norm / (norm + 1e-6)
            if clip < 1.0:
                self.grads.flat.mul_(clip)
            self.optim.step(self.optimizer, self.updates)
            self._restore_frozen(kept)
            self.refresh()
        return norm

    def _updated(self) -> tuple[torch.Tensor, int]:
        """The fp32 weights AdamW updates here (the whole flat buffer, or this replica's part) and
        their first element's place in the flat buffer."""
        if self.shard is None:
            return self._unsharded_weights().flat, 0
        return self.params[PART].detach(), self.shard.lo

    @functools.cached_property
    def _frozen_spans(self) -> list[tuple[int, int]]:
        """[start, stop) in ``_updated``'s weights of each frozen parameter's elements there."""
        updated, lo = self._updated()
        spans = []
        for name, (start, box) in flat_offsets(self.state.layout, self.rank).items():
            first, last = max(start, lo), min(start + box.numel, lo + updated.numel())
            if is_frozen(name) and first < last:
                spans.append((first - lo, last - lo))
        return spans

    def _frozen_values(self) -> list[tuple[int, int, torch.Tensor]]:
        """The frozen parameters' weights before an update: AdamW's weight decay would shrink them
        (their moments stay zero, as no gradient reaches them), so the update puts them back."""
        updated, _ = self._updated()
        return [(a, b, updated[a:b].clone()) for a, b in self._frozen_spans]

    @torch.no_grad()
    def _restore_frozen(self, kept: list[tuple[int, int, torch.Tensor]], into_copy: bool = False) -> None:
        """The frozen weights as they were, and in the compute copy too where the update wrote it."""
        updated, lo = self._updated()
        for a, b, value in kept:
            updated[a:b] = value
            if into_copy:
                self.state.params.flat[lo + a : lo + b] = value.to(self.state.params.flat.dtype)

    @torch.no_grad()
    def _take_grads(self) -> None:
        """The accumulated gradients in fp32 for the update (bf16 ones cast; idempotent)."""
        if self.grads is not self.state.grads:
            self.grads.flat.copy_(self.state.grads.flat)

    def optimizer_bytes(self) -> int:
        """Bytes this rank holds for the update: fp32 master weights and AdamW's moments."""
        moments = sum(
            t.numel() * t.element_size()
            for state in self.optimizer.state.values()
            for key, t in state.items()
            if key in ADAM_MOMENTS
        )
        return sum(p.numel() * p.element_size() for p in self.params.values()) + moments

    @property
    def dtype(self) -> torch.dtype:
        """The master weights' dtype (fp32 in every precision)."""
        return self.params[next(iter(self.params))].dtype

    def master_weights(self) -> FlatBuffer:
        """This rank's whole box of the fp32 master weights: the live buffer, or, sharded, a
        copy gathered from the replicas (collective over the replicas; ``load_weights`` takes it back)."""
        if self.shard is None:
            return self._unsharded_weights()
        return self._whole(self.params[PART].detach())

    def _whole(self, part: torch.Tensor) -> FlatBuffer:
        """This rank's whole box in fp32, every replica's ``part`` gathered into it (collective over the replicas)."""
        assert self.shard is not None, "only a sharded master gathers its parts"
        whole = FlatBuffer(self.state.layout, self.rank, device=self.state.params.flat.device)
        self.shard.gather_into(part, whole.flat)
        return whole

    @torch.no_grad()
    def load_weights(self, weights: FlatBuffer) -> None:
        """Take ``weights`` (this rank's whole box, e.g. loaded into ``master_weights()``) as the
        master weights; ``refresh`` then updates the compute copy."""
        if self.shard is not None:
            self.params[PART].copy_(self.shard.part(weights.flat))
        elif weights is not self.weights:
            self._unsharded_weights().flat.copy_(weights.flat)

    def optimizer_state(self) -> OptimizerState:
        """AdamW's state on this rank, per parameter of the master layout: the optimizer's own
        tensors where they exist, or, sharded, whole boxes gathered from the replicas
        (collective over the replicas)."""
        step = 0.0
        moments = {}
        for name, param in self.params.items():
            state = self.optimizer.state.get(param, {})
            step = float(state["step"]) if "step" in state else step
            moments[name] = {k: state[k] if k in state else torch.zeros_like(param) for k in ADAM_MOMENTS}
        if self.shard is None:
            return OptimizerState(step, moments)
        whole = {key: self._whole(moments[PART][key]).views for key in ADAM_MOMENTS}
        names = whole[ADAM_MOMENTS[0]]
        return OptimizerState(step, {name: {k: whole[k][name] for k in ADAM_MOMENTS} for name in names})

    def load_optimizer_state(self, state: OptimizerState) -> None:
        """Take ``state`` (copied) as AdamW's, as if its steps had run here (the schedule too)."""
        self.updates = int(state.step)
        moments = state.moments
        if self.shard is not None:  # whole boxes per parameter -> this replica's part
            parts = {}
            for key in ADAM_MOMENTS:
                buffer = FlatBuffer(self.state.layout, self.rank, device=self.state.params.flat.device)
                for name, view in buffer.views.items():
                    view.copy_(moments[name][key])
                parts[key] = self.shard.part(buffer.flat)
            moments = {PART: parts}
        for name, param in self.params.items():
            self.optimizer.state[param] = {
                "step": self.optim.step_count(self.optimizer, param, state.step),
                **{k: moments[name][k].detach().clone() for k in ADAM_MOMENTS},
            }

    def forget_updates(self) -> None:
        """AdamW's state and the schedule's position as before the first update (the weights
        stay): with ``load_weights`` of the initial weights, training starts over."""
        self.optimizer.state.clear()
        self.updates = 0

    def global_params(self) -> dict[str, torch.Tensor]:
        """Full parameters gathered on every rank (collective; tests and small models only)."""
        return self._gather(self.master_weights())

    def global_grads(self) -> dict[str, torch.Tensor]:
        """Full accumulated gradients gathered on every rank (collective; tests and small models)."""
        self._take_grads()
        return self._gather(self.grads)

    def _gather(self, buffer: FlatBuffer) -> dict[str, torch.Tensor]:
        """Every tensor whole on every rank: each rank writes its elements (one copy of each)
        into one flat buffer of all the tensors, summed over the ranks in one collective."""
        layout = self.state.layout
        sizes = [math.prod(p.shape) for p in layout.values()]
        flat = torch.zeros(sum(sizes), dtype=buffer.flat.dtype, device=buffer.flat.device)
        fulls = dict(zip(layout, (v.view(p.shape) for v, p in zip(flat.split(sizes), layout.values()))))
        for name, full in fulls.items():
            if name in buffer.views and self._counts_once(name):
                full[buffer.boxes[name].slices()] = buffer.views[name]
        dist.all_reduce(flat)
        return {name: full.cpu() for name, full in fulls.items()}
