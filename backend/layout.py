"""Where every weight of a LLaMA-style model lives under a strategy.

``TP_PLAN`` is the tensor-parallel layout, written once and keyed by parameter name
pattern (as torchtitan's ``parallelize`` plan): Megatron's layout, where attention
q/k/v and the FFN gate/up projections are column-parallel (output dim sharded over
tp), attention output and FFN down projections are row-parallel (input dim sharded),
the embedding and the output head are vocab-parallel, norms are replicated. Layers are
split into ``pp`` contiguous stages; the embedding sits on the first stage, the final
norm and head on the last. A stage's ranks form a (dp, cp, tp) mesh (``MESH_DIMS``); every
weight is replicated over dp and over cp (context parallelism splits sequences, not weights). Names and shapes come
from ``ModelConfig.param_shapes`` (which the tests hold equal to the model's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Literal, Protocol
from warnings import warn

from hotswitch.backend.dist_state import DistState, Partial, Placement, Replicate, Shard
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy

TPStyle = Literal["column", "row", "vocab", "replicate"]
MeshDim = Literal["dp", "cp", "tp"]
MESH_DIMS: tuple[MeshDim, ...] = ("dp", "cp", "tp")  # a stage's DistState mesh, in order; pp is the stage

# parameter name pattern (fnmatch: ``*`` matches any run of characters) -> how tp splits it;
# every parameter of the model matches exactly one entry
TP_PLAN: Mapping[str, TPStyle] = MappingProxyType(
    {
        "tok_embeddings.weight": "vocab",
        "layers.*.attention_norm.weight": "replicate",
        "layers.*.attention.wq.weight": "column",
        "layers.*.attention.wk.weight": "column",
        "layers.*.attention.wv.weight": "column",
        "layers.*.attention.bq": "column",  # a column-parallel projection's bias is split with its outputs
        "layers.*.attention.bk": "column",
        "layers.*.attention.bv": "column",
        "layers.*.attention.q_norm.weight": "replicate",
        "layers.*.attention.k_norm.weight": "replicate",
        "layers.*.attention.wo.weight": "row",
        "layers.*.attention.bo": "replicate",  # a row-parallel projection's bias is added once, to the sum
        "layers.*.attention_out_norm.weight": "replicate",
        "layers.*.ffn_norm.weight": "replicate",
        "layers.*.feed_forward.w1.weight": "column",
        "layers.*.feed_forward.w2.weight": "row",
        "layers.*.feed_forward.w3.weight": "column",
        "layers.*.feed_forward.b1": "column",
        "layers.*.feed_forward.b2": "replicate",
        "layers.*.feed_forward.b3": "column",
        # a mixture of experts routes token by token: replicated, each rank routing its own tokens
        "layers.*.feed_forward.router.weight": "replicate",
        "layers.*.feed_forward.router.score_bias": "replicate",
        "layers.*.feed_forward.experts.w1": "replicate",
        "layers.*.feed_forward.experts.w2": "replicate",
        "layers.*.feed_forward.experts.w3": "replicate",
        # a shared expert is a dense feed-forward beside the routed ones: split as one; its gate's
        # one score per token is replicated
        "layers.*.feed_forward.shared.w1.weight": "column",
        "layers.*.feed_forward.shared.w2.weight": "row",
        "layers.*.feed_forward.shared.w3.weight": "column",
        "layers.*.feed_forward.shared_gate.weight": "replicate",
        "layers.*.ffn_out_norm.weight": "replicate",
        "norm.weight": "replicate",
        "output.weight": "vocab",
    }
)

# weights are [out, in] (nn.Linear) or [vocab, dim] (nn.Embedding, the head)
R = Replicate()
TP_PLACEMENTS: Mapping[TPStyle, Shard | Replicate] = MappingProxyType(
    {"column": Shard(0), "row": Shard(1), "vocab": Shard(0), "replicate": Replicate()}
)


class TensorLayout(Protocol):
    """Anything with a global shape and a DistState (e.g. ``ParamLayout``): what the switch
    planner and the flat buffers read of a layout (read-only: a frozen dataclass matches)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def state(self) -> DistState: ...


@dataclass(frozen=True)
class ParamLayout:
    """One parameter's ``TensorLayout`` under a strategy, with the pipeline stage holding it."""

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
    ranges = []
    start = 0
    for stage in range(pp):
        size = base + (stage < extra)
        ranges.append(range(start, start + size))
        start += size
    return ranges


def mesh_shape(strategy: Strategy) -> tuple[int, int, int]:
    """The sizes of a stage's mesh dims (``MESH_DIMS``) under ``strategy``."""
    return (strategy.dp, strategy.cp, strategy.tp)


def ulysses_fits(config: ModelConfig, strategy: Strategy) -> bool:
    """Whether the heads (and kv heads) on each tensor-parallel rank split over ``strategy.cp``."""
    heads = config.n_heads // strategy.tp
    kv = config.n_kv_heads // strategy.tp
    return heads % strategy.cp == 0 and kv % strategy.cp == 0


def context_flavour(config: ModelConfig, strategy: Strategy) -> Literal["ring", "ulysses", None]:
    """How attention runs over the cp ranks: None without context parallelism; Ulysses where
    asked and each tensor-parallel rank's query and key-value heads split over cp; else ring
    attention (with a warning when Ulysses was asked for)."""
    if strategy.cp == 1:
        return None
    heads = config.n_heads // strategy.tp
    kv_heads = config.n_kv_heads // strategy.tp
    if strategy.ulysses and not ulysses_fits(config, strategy):
        warn(
            f"{strategy}: Ulysses cannot split {heads} query / {kv_heads} key-value heads per tensor-parallel rank "
            f"over cp={strategy.cp}; {config.name} runs ring attention instead (write cp{strategy.cp} to say so)",
            stacklevel=2,
        )
        return "ring"
    return "ulysses" if strategy.ulysses else "ring"


def check_strategy(config: ModelConfig, strategy: Strategy) -> None:
    """Raise naming the offending value if ``strategy`` cannot hold ``config``."""
    tp = strategy.tp
    for what, value in (
        ("n_heads", config.n_heads),
        ("n_kv_heads", config.n_kv_heads),
        ("ffn_dim", config.ffn_dim),
        ("shared expert's ffn_dim", config.experts.shared_ffn_dim if config.experts else 0),
        ("vocab_size", config.vocab_size),
    ):
        if value % tp:
            raise ValueError(
                f"{strategy}: tp={tp} does not divide {config.name}'s {what}={value}; choose tp dividing it"
            )
    if "sliding" in config.layer_kinds and context_flavour(config, strategy) == "ring":
        raise ValueError(
            f"{strategy}: {config.name}'s sliding-window layers (sliding_window={config.sliding_window}) are not "
            f"computed under ring attention yet; give Ulysses (ul{strategy.cp}, where each tensor-parallel rank's "
            "heads split over it), or train its long sequences with tp/sp or pp"
        )
    _check_experts(config, strategy)
    stage_layers(config.n_layers, strategy.pp)


def _check_experts(config: ModelConfig, strategy: Strategy) -> None:
    if strategy.ep == 1:
        return
    if config.experts is None:
        raise ValueError(f"{strategy}: ep={strategy.ep} splits experts, and {config.name} has none; drop ep")
    if config.experts.count % strategy.ep:
        raise ValueError(
            f"{strategy}: ep={strategy.ep} does not divide {config.name}'s {config.experts.count} experts; "
            "choose ep dividing the expert count"
        )


def tp_style(name: str) -> TPStyle:
    """How tensor parallelism splits parameter ``name``: its one ``TP_PLAN`` entry."""
    matches = [pattern for pattern in TP_PLAN if fnmatchcase(name, pattern)]
    if not matches:
        raise ValueError(f"parameter {name!r} matches no entry of TP_PLAN in layout.py; add one for it")
    if len(matches) > 1:
        raise ValueError(f"parameter {name!r} matches several TP_PLAN entries {matches}; make them disjoint")
    return TP_PLAN[matches[0]]


def _stage_of(name: str, stages: list[range]) -> int:
    if name.startswith("layers."):
        layer = int(name.split(".")[1])
        return next(s for s, r in enumerate(stages) if layer in r)
    return 0 if name == "tok_embeddings.weight" else len(stages) - 1  # a tied head reads it from stage 0


def param_layout(config: ModelConfig, strategy: Strategy) -> dict[str, ParamLayout]:
    """Every parameter's DistState under ``strategy``, in module order."""
    check_strategy(config, strategy)
    stages = stage_layers(config.n_layers, strategy.pp)
    layout = {}
    for name, shape in config.param_shapes().items():
        stage = _stage_of(name, stages)
        state = DistState(strategy.stage_ranks[stage], mesh_shape(strategy), (R, R, TP_PLACEMENTS[tp_style(name)]))
        if strategy.ep > 1 and is_expert(name):
            state = expert_state(strategy, stage)
        layout[name] = ParamLayout(name, shape, state, stage)
    return layout


def rank_params(layout: dict[str, ParamLayout], rank: int) -> list[ParamLayout]:
    """The parameters ``rank`` holds, in module order."""
    return [p for p in layout.values() if p.state.holds(rank)]


def tp_placement(state: DistState) -> Placement:
    """A stage's DistState's placement along tp (its last mesh dim, also of an expert's)."""
    return state.placements[-1]


def partial_over_replicas(layout: dict[str, ParamLayout]) -> dict[str, ParamLayout]:
    """The same layout with the dp and cp mesh dims ``Partial``: accumulated gradients before
    their reduction over the replica group (dp x cp), each replica holding one summand (an
    expert split over ep stays split there)."""
    out = {}
    for name, p in layout.items():
        kept = p.state.placements[1:2] if len(p.state.placements) == 4 else ()  # ep's split of the experts
        placements = (Partial(), *kept, Partial(), tp_placement(p.state))
        out[name] = replace(p, state=replace(p.state, placements=placements))
    return out


# parameters the update leaves as they are: no gradient reaches them, and AdamW's weight decay
# would shrink them (``train.state.master``)
FROZEN = ("layers.*.feed_forward.router.score_bias",)  # the router's choice bias (``models.experts``)


def is_frozen(name: str) -> bool:
    """Whether parameter ``name`` stays as loaded through training (``FROZEN``)."""
    return any(fnmatchcase(name, pattern) for pattern in FROZEN)


def is_expert(name: str) -> bool:
    """Whether parameter ``name`` is a routed layer's experts' (split over ep)."""
    return ".feed_forward.experts." in name


def expert_state(strategy: Strategy, stage: int) -> DistState:
    """An expert parameter's DistState under expert parallelism: the stage's (dp, cp, tp) mesh
    with dp seen as (dp / ep, ep), the experts split over ep, replicated over the rest."""
    mesh = (strategy.dp // strategy.ep, strategy.ep, strategy.cp, strategy.tp)
    return DistState(strategy.stage_ranks[stage], mesh, (R, Shard(0), R, R))


def compiled_placements(p: ParamLayout) -> tuple[Placement, ...]:
    """``p``'s placements along the stage's (dp, cp, tp) mesh as the graph compiler sees them:
    an expert split over ep is a replicated weight there (the mixture sends tokens to it)."""
    placements = p.state.placements
    return (R, placements[2], placements[3]) if len(placements) == 4 else placements
