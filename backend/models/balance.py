"""A mixture of experts' load-balancing auxiliary loss, per sequence.

Transformers (``load_balancing_loss_func``: Qwen3-MoE, OLMoE, Mixtral) adds
``router_aux_loss_coef * E * sum_e f_e * P_e`` to the loss, where over the router scores of
every routed layer and every real (unpadded) token of a forward's batch, concatenated, ``f_e``
is the share of (layer, token) pairs that pick expert ``e`` among their top-k (summed over the k
slots) and ``P_e`` the mean probability of ``e``. Over a forward's batch it depends on which
sequences share a forward, which a hot-switch plan changes with every strategy's micro-batches,
and the step with it. hotswitch takes the sequence as the unit (as DeepSeek-V3's sequence-wise
balance loss does): each sequence's auxiliary loss is transformers' over a batch of that
sequence alone, and the step adds ``coef`` times their mean over the global batch's sequences:
one value for every plan, and transformers' own for a batch of one sequence.

``f`` carries no gradient (it counts a top-k), so a token's probabilities at each layer get
``coef / D * E * F_d / N_d**2`` added to their gradient (``F_d``: sequence ``d``'s picks of each
expert over all its routed layers, ``N_d``: its layers times tokens, ``D``: the batch's
sequences). ``Balanced`` adds it in backward; forward counts every layer's picks in the
micro-batch's ``SequenceRouting``, complete before any backward reads it. A pipeline splits the
layers over stages: a stage passes its routing so far (``carried``) on with its activations, and
the last stage's complete routing comes back with their gradients (``parallel.pipeline``), so
each stage's backward sees every layer's picks. Sequence and context parallelism split a
sequence's tokens: each rank counts its own (``localize``: the graph's ``token_share``), and the
last stage sums them over the token group. The value is counted once, where the routing
completes.

The engine drives one ``BalanceLedger`` per process (``BALANCE``): ``start_step`` with the
step's sequence count, ``begin`` before each micro-batch's forward with its tokens' sequences,
``weighted_since`` for a group's share of the loss, ``close`` at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


@dataclass
class SequenceRouting:
    """One micro-batch's routing, per sequence: ``sequences`` [tokens] is each of this rank's
    tokens' sequence in the micro-batch (-1 on padding; all of ``whole`` [rows, length] unless
    ``BalanceLedger.localize`` cut it), ``tokens`` [count] each sequence's tokens; ``picks`` and
    ``probs`` [count, experts] per routed layer: its tokens' picks of each expert and their
    summed probabilities (no gradient)."""

    sequences: torch.Tensor
    tokens: torch.Tensor
    layers: int
    picks: dict[int, torch.Tensor] = field(default_factory=dict)
    probs: dict[int, torch.Tensor] = field(default_factory=dict)
    copies: dict[torch.device, torch.Tensor] = field(default_factory=dict)  # ``sequences`` per device
    whole: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.long))  # [rows, length]
    upstream: torch.Tensor | None = None  # earlier pipeline stages' routing (``carried``)
    complete: torch.Tensor | None = None  # every stage's, from the last (``complete_with``)
    counts_value: bool = True  # false where a later stage, or another rank of the token group, does

    def on(self, device: torch.device) -> torch.Tensor:
        """``sequences`` on ``device``, copied once for every layer that reads it."""
        if device not in self.copies:
            self.copies[device] = self.sequences.to(device)
        return self.copies[device]

    @classmethod
    def of(cls, sequences: torch.Tensor, layers: int) -> SequenceRouting:
        flat = sequences.reshape(-1)
        count = max(int(flat.max()) + 1 if flat.numel() else 0, 1)  # an idle micro-batch: one empty
        tokens = torch.bincount(flat[flat >= 0], minlength=count).double()
        return cls(flat, tokens, layers, whole=sequences)

    def record(self, layer: int, picked: torch.Tensor, probs: torch.Tensor) -> None:
        """Layer ``layer``'s picks [tokens, k] and probabilities [tokens, experts] (set, not
        added: a checkpointed layer recomputed in backward records the same again)."""
        sequences = self.on(picked.device)
        if len(sequences) != len(picked):
            raise RuntimeError(
                f"routed layer {layer} saw {len(picked)} tokens where the micro-batch's routing expects "
                f"{len(sequences)} (a strategy's token share not given to BALANCE.localize)"
            )
        real = sequences >= 0
        seq = sequences[real]
        count, experts = len(self.tokens), probs.shape[-1]
        chosen = torch.zeros(len(seq), experts, dtype=torch.float64, device=picked.device)
        chosen.scatter_add_(1, picked[real], torch.ones(picked[real].shape, dtype=torch.float64, device=picked.device))
        zeros = torch.zeros(count, experts, dtype=torch.float64, device=picked.device)
        self.picks[layer] = zeros.index_add(0, seq, chosen)
        self.probs[layer] = zeros.index_add(0, seq, probs.detach()[real].double())

    def carried(self) -> torch.Tensor:
        """The routing of this stage's layers and the stages before it, as one tensor [count,
        2 * experts + 1] (float64): picks, summed probabilities, and the layers counted, in
        the last column."""
        if self.complete is not None:
            return self.complete
        mine = [torch.cat([self.picks[i], self.probs[i]], -1) for i in self.picks]
        if not mine:  # a stage of no routed layer passes on what reached it
            if self.upstream is None:
                raise RuntimeError("no routed layer has recorded this micro-batch's routing")
            return self.upstream
        summed = torch.stack(mine).sum(0)
        out = torch.cat([summed, torch.full_like(summed[:, :1], len(mine))], -1)
        return out if self.upstream is None else out + self.upstream.to(out.device)

    def complete_with(self, carried: torch.Tensor) -> None:
        """A later stage's complete routing (``carried`` there), for this stage's backward."""
        self.complete = carried

    def totals(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(picks over every layer [count, experts], their summed probabilities, ``N_d``: layers
        times tokens [count])."""
        carried = self.carried()
        experts = (carried.shape[-1] - 1) // 2
        layers = carried[:, -1]
        if not bool((layers == self.layers).all()):
            raise RuntimeError(
                f"the auxiliary loss needs every routed layer's routing before backward; {int(layers.min())} of "
                f"{self.layers} recorded"
            )
        n = self.tokens.to(carried.device) * self.layers
        return carried[:, :experts], carried[:, experts:-1], n

    def gradient(self, weight: float, experts: int) -> torch.Tensor:
        """The auxiliary loss's gradient of each token's probabilities [tokens, experts] (zero on
        padding), for the loss ``weight * sum_d aux_d``."""
        picks, _, n = self.totals()
        per_sequence = weight * experts * picks / (n * n).clamp(min=1)[:, None]
        out = torch.zeros(len(self.sequences), experts, dtype=torch.float64, device=picks.device)
        sequences = self.on(picks.device)
        real = sequences >= 0
        out[real] = per_sequence[sequences[real]]
        return out

    def value(self) -> torch.Tensor:
        """The sum over this micro-batch's sequences of their auxiliary losses."""
        picks, probs, n = self.totals()
        return (picks.shape[-1] * (picks * probs).sum(-1) / (n * n).clamp(min=1)).sum()


class Balanced(torch.autograd.Function):
    """Identity on a layer's router probabilities; backward adds the auxiliary loss's gradient."""

    @staticmethod
    def forward(ctx, probs, picked, layer: int, routing: SequenceRouting, weight: float):
        if torch._C._current_graph_task_id() == -1:  # not a checkpointed recompute inside backward
            routing.record(layer, picked, probs)
        ctx.routing, ctx.weight = routing, weight
        return probs.view_as(probs)

    @staticmethod
    def backward(ctx, grad):
        extra = ctx.routing.gradient(ctx.weight, grad.shape[-1]).to(grad.dtype)
        return grad + extra.reshape(grad.shape), None, None, None, None


class BalanceLedger:
    """This process's auxiliary loss: its weight (``coef`` over the step's sequences), the
    micro-batches' routing, and their value. Off (``routing`` None) outside a training step."""

    def __init__(self) -> None:
        self.coef = 0.0
        self.layers = 0
        self.weight = 0.0
        self.routing: SequenceRouting | None = None
        self.seen: list[SequenceRouting] = []

    def start_step(self, coef: float, layers: int, sequences: int) -> None:
        """A training step of ``sequences`` over a model of ``layers`` routed layers; ``coef``
        zero turns the loss off."""
        self.coef, self.layers = coef, layers
        self.weight = coef / sequences if coef and sequences else 0.0
        self.routing, self.seen = None, []

    def begin(self, sequences: torch.Tensor) -> None:
        """The next micro-batch's forward: each of its tokens' sequence (-1 on padding)."""
        if self.weight:
            self.routing = SequenceRouting.of(sequences, self.layers)
            self.seen.append(self.routing)

    def localize(self, share: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """The current micro-batch's tokens on this rank are ``share`` of the whole [rows, length]
        (sp and cp split them): its routing counts those; the sequences' sizes stay whole."""
        if self.routing is not None:
            self.routing.sequences = share(self.routing.whole).reshape(-1)
            self.routing.copies.clear()

    def balanced(self, probs: torch.Tensor, picked: torch.Tensor, layer: int) -> torch.Tensor:
        """``probs`` through ``Balanced`` where a training step's routing is open, else as is."""
        if self.routing is None:
            return probs
        return Balanced.apply(probs, picked, layer, self.routing, self.weight)

    def carry_on(self, arrived: torch.Tensor | None, last: bool) -> SequenceRouting | None:
        """A pipeline stage has run the current micro-batch's forward, ``arrived`` the routing
        carried from the stage before (None on the first): the micro-batch's routing (None with
        the loss off), whose ``carried`` the stage passes on unless ``last``."""
        routing = self.routing
        if routing is not None:
            routing.upstream = arrived
            routing.counts_value = last
        return routing

    @contextmanager
    def backward_of(self, routing: SequenceRouting | None) -> Iterator[None]:
        """A micro-batch's backward: layers recomputed there (activation checkpointing) read its
        own ``routing``, not the latest forward's (a pipeline runs others in between)."""
        latest = self.routing
        self.routing = routing
        try:
            yield
        finally:
            self.routing = latest

    def opened(self) -> int:
        """How many micro-batches this step has begun (a mark for ``weighted_since``)."""
        return len(self.seen)

    def weighted_since(self, mark: int, device: torch.device) -> torch.Tensor:
        """``weight`` times the auxiliary losses of the sequences of the micro-batches begun since
        ``mark``: their share of the step's ``coef`` times the mean over its sequences."""
        total = torch.zeros((), dtype=torch.float64, device=device)
        for routing in self.seen[mark:]:
            if routing.counts_value:
                total = total + routing.value().to(device)
        return total * self.weight

    def close(self) -> None:
        """The step is over: routing off until the next ``start_step``."""
        self.weight, self.routing, self.seen = 0.0, None, []


BALANCE = BalanceLedger()  # the one a process's routed layers read, driven by its engine
