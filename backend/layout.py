"""Where every weight of a LLaMA-style model lives under a strategy.

Megatron's layout: attention q/k/v and the FFN gate/up projections are
column-parallel (output dim sharded over tp), attention output and FFN down
projections are row-parallel (input dim sharded), the embedding and the output
head are vocab-parallel, norms are replicated. Layers are split into ``pp``
contiguous stages; the embedding sits on the first stage, the final norm and
head on the last. Every weight is replicated over dp.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hotswitch.backend.dist_state import DistState, Partial, Replicate, Shard
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy

_COLUMN = ("attention.wq.", "attention.wk.", "attention.wv.", "feed_forward.w1.", "feed_forward.w3.")
_ROW = ("attention.wo.", "feed_forward.w2.")


@dataclass(frozen=True)
class ParamLayout:
    name: str
    shape: tuple[int, ...]
    state: DistState
    stage: int


def stage_layers(n_layers: int, pp: int) -> list[range]:
    """Contiguous layer ranges per pipeline stage, as even as possible (earlier stages
    take the remainder: the last stage also carries the head and the loss)."""
    if pp > n_layers:
        raise ValueError(f"pp={pp} stages need at least {pp} layers, the model has {n_layers}; lower pp")
    base, extra = divmod(n_layers, pp)
    ranges, start = [], 0
    for stage in range(pp):
        size = base + (stage < extra)
        ranges.append(range(start, start + size))
        start += size
    return ranges


def check_strategy(config: ModelConfig, strategy: Strategy) -> None:
    """Raise naming the offending value if ``strategy`` cannot hold ``config``."""
    tp = strategy.tp
    for what, value in (
        ("n_heads", config.n_heads),
        ("n_kv_heads", config.n_kv_heads),
        ("ffn_dim", config.ffn_dim),
        ("vocab_size", config.vocab_size),
    ):
        if value % tp:
            raise ValueError(
                f"{strategy}: tp={tp} does not divide {config.name}'s {what}={value}; choose tp dividing it"
            )
    stage_layers(config.n_layers, strategy.pp)


def _tp_placement(name: str) -> Shard | Replicate:
    if name in ("tok_embeddings.weight", "output.weight") or any(k in name for k in _COLUMN):
        return Shard(0)
    if any(k in name for k in _ROW):
        return Shard(1)
    return Replicate()


def _stage_of(name: str, stages: list[range]) -> int:
    if name.startswith("layers."):
        layer = int(name.split(".")[1])
        return next(s for s, r in enumerate(stages) if layer in r)
    return 0 if name == "tok_embeddings.weight" else len(stages) - 1


def param_layout(config: ModelConfig, strategy: Strategy) -> dict[str, ParamLayout]:
    """Every parameter's DistState under ``strategy``, in module order."""
    check_strategy(config, strategy)
    stages = stage_layers(config.n_layers, strategy.pp)
    layout = {}
    for name, shape in config.param_shapes().items():
        stage = _stage_of(name, stages)
        state = DistState(
            strategy.stage_ranks[stage],
            (strategy.dp, strategy.tp),
            (Replicate(), _tp_placement(name)),
        )
        layout[name] = ParamLayout(name, shape, state, stage)
    return layout


def rank_params(layout: dict[str, ParamLayout], rank: int) -> list[ParamLayout]:
    """The parameters ``rank`` holds, in module order."""
    return [p for p in layout.values() if p.state.holds(rank)]


def partial_over_dp(layout: dict[str, ParamLayout]) -> dict[str, ParamLayout]:
    """The same layout with the dp mesh dim ``Partial``: accumulated gradients before
    their reduction over dp, each dp replica holding one summand."""
    return {
        name: replace(p, state=replace(p.state, placements=(Partial(), *p.state.placements[1:])))
        for name, p in layout.items()
    }
