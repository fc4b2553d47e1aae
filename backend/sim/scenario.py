"""What a simulation is of: a model, a cluster of a device kind, a context length, the precision,
and the ``CostModel`` it implies for a set of strategies and an instantiation strategy."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.layout import check_strategy
from hotswitch.backend.models.config import ModelConfig, get_config
from hotswitch.backend.models.hf_config import config_from_hf
from hotswitch.backend.precision import Precision
from hotswitch.backend.sim.compute import UPDATE_BYTES, SimulatedCost, SimulatedStrategy, update_seconds
from hotswitch.backend.sim.device import DeviceSpec, device_spec
from hotswitch.backend.sim.expert_parallel import routed_rows, uniform_imbalance
from hotswitch.backend.sim.switches import PlannedSwitches
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.planning.context import check_context
from hotswitch.backend.train.planning.cost import CostModel, LinkProfile, StrategyCost
from hotswitch.backend.train.planning.memory import device_params

PAPER_MODELS = ("7b", "13b", "32b")
PAPER_CONTEXT = 32768  # the paper trains its LLaMA-2 shapes at up to 32K tokens
LONG_CONTEXT = 131072  # beyond the paper: its shapes at up to 128K, with context parallelism


def sim_model(name: str | ModelConfig, context: int = 0) -> ModelConfig:
    """A model preset; the paper's shapes (7b, 13b, 32b) with the 32K context it trains them at,
    128K where ``context`` asks for more than 32K (or the longer one a given config already has).
    ``hf:DIR``: a Hugging Face checkpoint's shape, read from its ``config.json`` alone (no
    weights are read, so a folder holding just the config prices a cluster)."""
    if isinstance(name, str) and name.startswith("hf:"):
        return config_from_hf(name[len("hf:") :])
    config = get_config(name)
    if config.name in PAPER_MODELS:
        longest = LONG_CONTEXT if context > PAPER_CONTEXT else PAPER_CONTEXT
        return config.with_(max_seq_len=max(config.max_seq_len, longest))
    return config


def profile_lengths(context: int) -> list[int]:
    """Where strategy costs are evaluated and fitted: powers of two from 128, and the context."""
    lengths = []
    n = 128
    while n < context:
        lengths.append(n)
        n *= 2
    return [*lengths, context]


@dataclass
class Setup:
    """A model on ``gpus`` devices of ``device`` kind, a global batch of sequence ``lengths``
    (each at most ``context`` tokens).

    ``shard_optimizer``: the fp32 master weights and AdamW moments are split over the
    instantiation strategy's dp ranks, as Megatron's distributed optimizer (the paper's
    baseline) does; the engine itself keeps them whole on every dp rank, so ``False`` is what
    it would take today. ``token_budget``: tokens per micro-batch, as the trainer packs them
    (its default; a longer sequence travels alone). ``planned_switches``: switch times from the
    engine's planner (default) or from their bound (``sim.switch_bound``, seconds faster).
    ``context_parallel``: ``auto`` also considers cp layouts (``planning.context``); a plan
    naming Ulysses where the heads do not split runs ring attention, said in ``notices``.
    ``packing``: the trainer packs micro-batches (``planning.batching.pack_documents``).
    ``imbalance``: under expert parallelism, the busiest rank's routed rows over the mean (the
    same for every ep layout); None: what uniform routing gives each layout at a full
    micro-batch (``sim.expert_parallel.uniform_imbalance``). ``envelope``: ``auto`` weighs only
    the candidates fastest somewhere in the batch (``sim.envelope``): seconds, not minutes, where
    a mixture of experts on a large cluster has a hundred candidates."""

    model: str | ModelConfig
    gpus: int
    context: int
    lengths: list[int]
    device: str = "A800"
    precision: Precision = field(default_factory=lambda: Precision.of("bf16"))
    token_budget: int = 4096
    shard_optimizer: bool = True
    planned_switches: bool = True  # False: every switch at its time bound (``sim.switch_bound``), much faster
    context_parallel: bool = False
    latency_aware: bool = False  # ``auto``'s Pareto pruning also weighs one sequence's time alone
    packing: bool = False
    side_by_side: bool = False  # ``auto`` also weighs two device groups trained side by side
    imbalance: float | None = None
    envelope: bool = False  # ``auto`` searches the candidates' lower envelope only (``sim.envelope``)
    notices: list[str] = field(default_factory=list)
    config: ModelConfig = field(init=False)
    spec: DeviceSpec = field(init=False)
    cluster: Cluster = field(init=False)
    costs: dict[Strategy, StrategyCost] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.config = sim_model(self.model)
        self.spec = device_spec(self.device)
        self.cluster = self.spec.cluster(self.gpus)
        if not 0 < self.context <= self.config.max_seq_len:
            raise ValueError(
                f"context {self.context} is outside what {self.config.name} takes (1 to {self.config.max_seq_len} "
                f"tokens); give --context at most {self.config.max_seq_len}"
            )
        if not self.lengths or min(self.lengths) < 1 or max(self.lengths) > self.context:
            raise ValueError(
                f"a batch needs sequences of 1 to {self.context} tokens (the context), got "
                f"{len(self.lengths)} sequences of {min(self.lengths, default=0)} to {max(self.lengths, default=0)}"
            )

    @cached_property
    def switches(self) -> PlannedSwitches:
        switches = PlannedSwitches(self.config, self.cluster, self.precision, self.spec.latency_s)
        switches.estimate = not self.planned_switches
        return switches

    def check(self, strategy: Strategy) -> Strategy:
        """Raise, naming the limit, if ``strategy`` cannot lay the model out on this cluster; the
        strategy that runs (Ulysses falls back to ring where the heads do not split, noticed)."""
        runs, notice = check_context(self.config, strategy, self.cluster.world_size)
        if notice and notice not in self.notices:
            self.notices.append(notice)
        runs.check_fits(self.cluster.world_size)
        check_strategy(self.config, runs)
        return runs

    def weighing(self, context_parallel: bool, side_by_side: bool) -> Setup:
        """This setup with ``auto`` weighing the cp layouts or device groups or not, sharing the
        strategy costs computed so far: they depend on the model, cluster and batch, not on what
        ``auto`` weighs."""
        out = replace(self, context_parallel=context_parallel, side_by_side=side_by_side)
        out.costs = self.costs
        return out

    def simulated(self, strategy: Strategy) -> SimulatedStrategy:
        runs = self.check(strategy)
        imbalance = self.expert_imbalance(runs)
        return SimulatedStrategy(self.config, runs, self.cluster, self.spec, self.precision, imbalance)

    def expert_imbalance(self, strategy: Strategy) -> float:
        """``imbalance`` where given, else uniform routing's for ``strategy``'s ep group at a
        micro-batch of the token budget (1 without ep)."""
        if strategy.ep == 1:
            return 1.0
        if self.imbalance is not None:
            return self.imbalance
        return uniform_imbalance(routed_rows(self.config, strategy, self.token_budget), strategy.ep)

    def strategy_cost(self, strategy: Strategy) -> StrategyCost:
        """What the trainer's profile would give for ``strategy``: measured and fitted."""
        if strategy not in self.costs:
            self.costs[strategy] = self.simulated(strategy).cost(profile_lengths(self.context), self.token_budget)
        return self.costs[strategy]

    def exact_model(self, cost: CostModel) -> CostModel:
        """``cost`` with every micro-batch at the simulated device's exact seconds: what a step
        planned on ``cost`` then takes."""
        strategies: dict[Strategy, StrategyCost] = {
            s: SimulatedCost.of(c, self.simulated(s)) for s, c in cost.strategies.items()
        }
        return replace(cost, strategies=strategies)

    def optimizer_share(self, instantiation: Strategy) -> float:
        """Parameters whose master weights and moments one device of the instantiation keeps: its
        shard (``memory.device_params``), over its dp x cp replicas where sharded."""
        s = self.master(instantiation)
        return device_params(self.config, s) / (s.replicas if self.shard_optimizer else 1)

    @staticmethod
    def master(instantiation: Strategy) -> Strategy:
        """``instantiation`` as it can hold the master weights; raise, naming the fix, for one
        splitting experts over ep (the engine's instantiation holds every expert)."""
        if instantiation.ep > 1:
            raise ValueError(
                f"the instantiation strategy holds every expert on each replica; {instantiation} splits them over "
                f"ep={instantiation.ep}: give it without ep (dispatch.instantiation_strategy drops it)"
            )
        return instantiation

    def budget(self, instantiation: Strategy) -> float:
        """Bytes per device for a strategy's own parameters, gradients and activations: the
        device's usable memory less the instantiation's master weights and moments."""
        usable = self.spec.memory - self.spec.reserved
        return usable - self.precision.master_bytes * self.optimizer_share(instantiation)

    def update_s(self, instantiation: Strategy) -> float:
        """AdamW over the device's share, bound by memory bandwidth; with a sharded optimizer
        the updated compute copies are then gathered over dp."""
        if self.shard_optimizer:
            return update_seconds(self.config, self.cluster, self.spec, self.precision, instantiation)
        return UPDATE_BYTES * self.optimizer_share(instantiation) / self.spec.hbm_bw

    def cost_model(self, strategies: list[Strategy], instantiation: Strategy) -> CostModel:
        """The ``CostModel`` of ``strategies`` with ``instantiation`` holding the master weights:
        what ``train.profile`` would build from measurements on this cluster."""
        every = list(dict.fromkeys([*strategies, instantiation]))
        self.switches.allow(every)
        link = LinkProfile(self.cluster.intra_bw, self.spec.latency_s, self.spec.hbm_bw)
        return CostModel(
            strategies={s: self.strategy_cost(s) for s in every},
            budget=self.budget(instantiation),
            link=link,
            update_s=self.update_s(instantiation),
            switch_s=self.switches,
            token_budget=self.token_budget,
            packed=self.packing,
        )
