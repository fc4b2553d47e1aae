"""The training loop on every rank: plan, step, report, obey control, checkpoint.

Control commands arrive on rank 0 (``control()`` returns the new ones) and are broadcast to
every rank at the next step boundary, so all ranks apply them at the same point:

``{"command": "switch", "strategy": "auto" | "dp4" | [["tp4", 128], ["dp4", 0]]}``  new buckets
``{"command": "pause" | "resume" | "stop"}``                  hold, go on, or end after this step
``{"command": "checkpoint", "path": "..."}``                                 save now

Every ``checkpoint_every`` steps a checkpoint goes to the notebook folder's ``checkpoints/step-N``
(the newest ``keep_checkpoints`` kept); every ``evaluation.every`` steps an ``eval`` event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

import torch.distributed as dist

from hotswitch.backend.data.stream import BatchStream, Sequence
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.config.paths import notebook_dir
from hotswitch.backend.train.config.run_config import RunConfig
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.evaluation import Evaluation
from hotswitch.backend.train.loop.events import Sink, discard, event
from hotswitch.backend.train.loop.prediction_watch import PredictionWatch
from hotswitch.backend.train.loop.step_report import graphs_event, plan_event, step_event
from hotswitch.backend.train.planning.auto import check_feasible
from hotswitch.backend.train.planning.cost import CostModel
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.planning.profile import profile, profile_lengths
from hotswitch.backend.train.planning.side_by_side import auto_strategies, best_plan
from hotswitch.backend.train.state import checkpoint
from hotswitch.backend.train.state.master import InitialValue
from hotswitch.backend.train.state.resume import ResumePoint
from hotswitch.backend.train.state.run_checkpoints import CheckpointPolicy, remove, unwritable

Control = Callable[[], list[dict]]
PAUSE_POLL_S = 0.2


def _a_run(run: RunConfig | Mapping | str | None) -> RunConfig | Mapping | str:
    """``run``; TypeError naming the fix for a plan given in its place (as 0.1's calls did)."""
    if not isinstance(run, HotSwitchPlan | list | str) or (isinstance(run, str) and run.endswith(".toml")):
        return run or {}
    plan = run.spec if isinstance(run, HotSwitchPlan) else run
    raise TypeError(f"Trainer(config, data, run) takes a run configuration, not a plan: pass {{'plan': {plan!r}}}")


class Trainer:
    """Trains ``config`` on ``data`` as the run configuration ``run`` says (a ``RunConfig``, a flat
    dict of its keys, ``{"plan": "dp2", "token_budget": 1024}``, or a TOML file), reading the
    sections a trainer owns (``RunConfig.check_training``, checked against ``data``): steps and
    seed, optimizer, parallelism and plan, precision and memory, checkpoints. Under ``plan``
    ``"auto"`` each batch gets the buckets predicted fastest among the dp x tp x pp layouts (and cp
    ones and device groups as ``context_parallel`` and ``side_by_side`` say); a ``memory_budget``
    prices fixed plans too (infeasible buckets refused first). ``resume``: the run's
    ``resume_from`` as its check read it (None: read here); ``evaluation`` and ``initial`` (the
    first weights' values, e.g. a Hugging Face checkpoint's) come built."""

    def __init__(
        self,
        config: ModelConfig,
        data: BatchStream,
        run: RunConfig | Mapping | str | None = None,
        *,
        sink: Sink = discard,
        control: Control | None = None,
        resume: ResumePoint | None = None,
        evaluation: Evaluation | None = None,
        initial: InitialValue | None = None,
    ):
        self.config = config
        self.data = data
        self.run = run = RunConfig.of(_a_run(run)).check_training(data.max_len)
        ckpt = run.checkpoints
        parallelism = run.parallelism
        precision = run.precision
        folder = notebook_dir() / "checkpoints"
        self.checkpoints = CheckpointPolicy(folder, ckpt)
        self.evaluation = evaluation
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.sink = sink if self.rank == 0 else discard
        self.control = control if control is not None and self.rank == 0 else (lambda: [])
        resume = resume or ckpt.resume_point(config)  # read here: fail before any work
        plan = parallelism.hot_switch_plan()
        self.auto = plan == "auto"
        fixed = None if isinstance(plan, str) else plan
        self.resident = self._auto_strategies() if self.auto else []
        strategies = self.resident if fixed is None else list(fixed.strategies)
        chosen = Strategy.parse(parallelism.instantiation or instantiation_strategy(strategies))
        self.engine = Engine(config, strategies, chosen, run, initial=initial)
        if parallelism.shard_optimizer and chosen.replicas == 1:
            why = f"{chosen} has one replica (dp x cp): the optimizer state stays whole (nothing to shard)"
            self.sink(event("warning", message=f"shard_optimizer: {why}"))
        self._cost: CostModel | None = None
        self.predictions = PredictionWatch()  # rank 0's: a profile far off the steps is measured again
        self.reprofile_why: str | None = None
        first = self._first_plan(fixed, strategies, precision.memory_budget)
        self.step_index = 0
        if resume:
            checkpoint.load(self.engine, resume.path)
            if restart := self.data.load_state_dict(resume.data):
                self.sink(event("warning", message=f"resume_from: {restart}"))
            self.step_index = resume.step
        self._apply_plan(first, "auto" if self.auto else "buckets")
        self.sink(graphs_event(self.engine))
        self.stopping = False

    # -- plan --------------------------------------------------------------------------------------
    def _first_plan(
        self, fixed: HotSwitchPlan | None, strategies: list[Strategy], budget: float | None
    ) -> HotSwitchPlan:
        """The plan to start with (``fixed``, None under ``auto``), profiling first under ``auto`` or a memory
        budget (collective); raises where ``auto`` finds nothing holding ``max_len`` or a fixed plan's bucket cannot."""
        max_len = self.data.max_len
        if fixed is not None and budget is None:
            return fixed
        memory = budget if budget is not None else self.engine.free_memory()
        cost = profile(self.engine, strategies, profile_lengths(max_len), memory, report=self.sink)
        self.use_cost(cost)
        if fixed is None:
            return best_plan([max_len], cost, self.engine.instantiation, max_len)[0]
        check_feasible(fixed, cost, max_len)
        return fixed

    def _set_plan(self, plan: HotSwitchPlan, source: str, predicted: float | None = None) -> None:
        if plan != self.plan:
            self._apply_plan(plan, source, predicted)

    def _apply_plan(self, plan: HotSwitchPlan, source: str, predicted: float | None = None) -> None:
        """Put ``plan`` in force: its strategies resident, its execution order, its ``plan`` event."""
        self.engine.set_strategies([*plan.strategies, *self.resident])
        self.plan = plan
        self.order = execution_order(plan.strategies, self.engine.instantiation, self._switch_cost)
        self._reported_plan = plan_event(
            self.step_index, plan, list(self.order), self.engine.instantiation, predicted, source
        )
        self.sink(self._reported_plan)

    def announce(self) -> None:
        """Report the plan in force (from this step on) and the executable graphs again: all that
        a new listener needs to show the run without its earlier events (a ``WarmTrainer``'s next
        job, whose dashboard would otherwise have no plan and no strategies to offer)."""
        self.sink({**self._reported_plan, "time": time.time(), "step": self.step_index})
        self.sink(graphs_event(self.engine))

    def _switch_cost(self, a: Strategy, b: Strategy) -> float:
        if a == b:
            return 0.0
        return self.cost.switch_cost(a, b) if self.cost else self.engine.switch_plan("params", a, b).time_s

    def _plan_batch(self, lengths: list[int]) -> float | None:
        """Re-plan for this batch under ``auto``; the predicted step time when there is a cost model."""
        if self.auto and self.cost:  # rank 0 searches (ranks may share cores), every rank follows its plan
            box = [None if self.rank else best_plan(lengths, self.cost, self.engine.instantiation, self.data.max_len)]
            dist.broadcast_object_list(box, src=0)
            plan, predicted = cast("tuple[HotSwitchPlan, float]", box[0])  # every rank's, once broadcast
            if self._instantiate_where_trained(plan):
                self._apply_plan(plan, "auto", predicted)  # its order and event, with the new instantiation
            else:
                self._set_plan(plan, "auto", predicted)
            return predicted
        return self.cost.step_s(self.plan, lengths, self.engine.instantiation) if self.cost else None

    def _instantiate_where_trained(self, plan: HotSwitchPlan) -> bool:
        """Under ``auto`` with no instantiation given, before the first update of a fresh run: the
        master weights move to a strategy the first batch's plan trains on (the most split of its
        whole-world ones), where the candidates' most split one trains none of it, so that no
        step switches to a strategy that trains nothing and back. Whether they moved."""
        chosen = self.engine.instantiation
        fresh = self.step_index == 0 and self.engine.master.updates == 0
        whole = [s for s in plan.strategies if not s.is_group and s.ep == 1]
        if not fresh or self.run.parallelism.instantiation is not None or chosen in plan.strategies or not whole:
            return False
        self.engine.instantiate_on(instantiation_strategy(whole))
        self.sink(graphs_event(self.engine))
        return True

    # -- control ---------------------------------------------------------------------------------
    def _commands(self) -> list[dict]:
        """Rank 0's control commands, on every rank (with, first, its own ``reprofile``)."""
        own = [{"command": "reprofile", "why": self.reprofile_why}] if self.reprofile_why else []
        self.reprofile_why = None
        box = [own + self.control() if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0] or []

    def _obey(self, commands: list[dict]) -> None:
        paused = False
        while True:
            for c in commands:
                kind = c.get("command")
                if kind == "reprofile":  # the trainer's own, not a user's: no control event
                    self._reprofile(str(c.get("why")))
                    continue
                try:  # a command that cannot be carried out is reported, never fatal to the run
                    if kind == "switch" and c.get("strategy") == "auto":
                        self._enable_auto()
                    elif kind == "switch":
                        plan = HotSwitchPlan.of(c["strategy"])
                        if self.cost:
                            check_feasible(plan, self.cost, self.data.max_len)
                        self.auto = False
                        self._set_plan(plan, "fixed")
                    elif kind in ("pause", "resume"):
                        paused = kind == "pause"
                    elif kind == "stop":
                        self.stopping = True
                        paused = False
                    elif kind == "checkpoint":
                        self._checkpoint_now(c.get("path"))
                    else:
                        raise ValueError(f"unknown control command {c!r}")
                except (ValueError, KeyError, OSError) as error:
                    self.sink(event("warning", message=f"{command_text(c)} not applied: {error}"))
                    continue
                applied = {k: c[k] for k in ("strategy", "path") if k in c}
                self.sink(event("control", step=self.step_index, command=kind, **applied))
            if not paused:
                return
            time.sleep(PAUSE_POLL_S)
            commands = self._commands()

    @property
    def cost(self) -> CostModel | None:
        """The cost model that plans, predicts, balances and packs (None: none measured)."""
        return self._cost

    def use_cost(self, cost: CostModel) -> None:
        """Predict, balance and pack micro-batches by ``cost`` (measured on this cluster for
        these strategies, e.g. by another trainer: a comparison run needs no second profile)."""
        self._cost = cost
        self.engine.use_batching(cost.micro_batching())

    def _reprofile(self, why: str) -> None:
        """Measure the strategies afresh (collective), replacing the cached profile, and plan
        by the new one from this step on."""
        cost = self.cost
        if cost is None or not self.auto:  # a plan in force since: its strategies alone are resident
            return
        self.sink(event("warning", message=f"{why}: measuring the profile again (it replaces the cached one)"))
        lengths = profile_lengths(self.data.max_len)
        self.use_cost(profile(self.engine, list(cost.strategies), lengths, cost.budget, False, self.sink))

    def _auto_strategies(self) -> list[Strategy]:
        p = self.run.parallelism
        return auto_strategies(self.config, self.world, self.data.max_len, p.context_parallel, p.side_by_side)

    def _enable_auto(self) -> None:
        cost = self.cost
        if cost is None:  # every rank gets here at the same boundary: profiling is collective
            self.resident = self._auto_strategies()
            self.engine.set_strategies(self.resident)
            lengths = profile_lengths(self.data.max_len)
            free = self.engine.free_memory()
            cost = profile(self.engine, self.resident, lengths, free, report=self.sink)
            self.use_cost(cost)
        self.resident = list(cost.strategies)
        self.auto = True

    # -- checkpoints -------------------------------------------------------------------------------
    def _checkpoint_now(self, path: str | None) -> None:
        """A checkpoint command: refused on every rank alike (ValueError) when rank 0 sees the
        place cannot be written, so a bad path never splits the ranks' collectives; a write that
        fails anyway raises CheckpointError, naming the cause, on every rank (DCP gathers the failures)."""
        target = Path(path) if path else self.checkpoints.path_for(self.step_index)
        box = [unwritable(target) if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        if box[0]:
            raise ValueError(box[0])
        self.save(target)

    def save(self, path: str | Path | None = None) -> Path:
        """Checkpoint now (collective); without a path, into ``checkpoints/step-N``."""
        path = path or self.checkpoints.path_for(self.step_index)
        extra = {"step": self.step_index, "data": self.data.state_dict(), "buckets": self.plan.spec}
        saved = checkpoint.save(self.engine, path, extra)
        self.sink(event("checkpoint", step=self.step_index, path=str(saved), format="hotswitch"))
        return saved

    # -- the loop ----------------------------------------------------------------------------------
    def step(self, batch: list[Sequence], steps: int | None = None) -> dict:
        """Train one global batch (re-planned first under ``auto``) and report it: the ``switch``
        events of switches that ran for the first time, then the ``step`` event, which is
        returned. ``steps`` is the planned total the event reports (default: this step)."""
        predicted = self._plan_batch([s.length for s in batch])
        groups = self.plan.assign(batch)
        began = time.perf_counter()
        result = self.engine.step(groups, self.order)
        total = time.perf_counter() - began
        self.step_index += 1
        if self.rank == 0:
            self.reprofile_why = self.reprofile_why or self.predictions.add(predicted, total)
        for stats in self.engine.take_switch_stats():
            self.sink(event("switch", step=self.step_index, **stats))
        lr = self.engine.optim.lr_at(self.engine.master.updates)
        report = step_event(self.step_index, steps or self.step_index, batch, result, total, predicted, lr)
        self.sink(report)
        return report

    def _after_step(self) -> None:
        """The periodic work at a step boundary: evaluation, then a checkpoint (collective)."""
        if self.evaluation and self.evaluation.due(self.step_index):
            self.sink(self.evaluation.run(self.engine, self.step_index))
        if not self.checkpoints.due(self.step_index):
            return
        try:
            self._checkpoint_now(None)
        except (ValueError, OSError) as error:
            self.sink(event("warning", message=f"periodic checkpoint at step {self.step_index} not written: {error}"))
            return
        stale = self.checkpoints.periodic_written(self.checkpoints.path_for(self.step_index))
        if self.rank == 0:
            remove(stale)

    def train(self, steps: int, on_step: Callable[[dict], None] | None = None) -> dict:
        """Train until ``steps`` steps in total (counting resumed ones) or a stop command."""
        started = time.perf_counter()
        tokens = 0
        while self.step_index < steps and not self.stopping:
            self._obey(self._commands())
            if self.stopping:
                break
            report = self.step(self.data.next_batch(), steps)
            tokens += report["tokens"]
            self._after_step()
            if on_step:
                on_step(report)
        reason = "stopped" if self.stopping else "finished"
        done = event("done", step=self.step_index, reason=reason, seconds=time.perf_counter() - started, tokens=tokens)
        self.sink(done)
        return done


def command_text(control: dict) -> str:
    """A control command as a user would have written it: ``switch('tp4')``, ``checkpoint('ck')``."""
    kind = control.get("command", "?")
    args = [repr(control[k]) for k in ("strategy", "path") if control.get(k) is not None]
    return f"{kind}({', '.join(args)})"
