"""The training loop on every rank: plan, step, report, obey control, checkpoint.

Control commands arrive on rank 0 (``control()`` returns the new ones) and are
broadcast to every rank at the next step boundary, so all ranks apply them at the
same point:

``{"command": "switch", "strategy": "dp4" | [["tp4", 128], ["dp4", 0]]}``  new buckets
``{"command": "pause"}`` / ``{"command": "resume"}``                         hold between steps
``{"command": "stop"}``                                                      end after this step
``{"command": "checkpoint", "path": "..."}``                                 save now
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch.distributed as dist

from hotswitch.backend.data.stream import BatchStream
from hotswitch.backend.graph.logical import summarize
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train import checkpoint
from hotswitch.backend.train.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.engine import Engine
from hotswitch.backend.train.events import Sink, discard, event
from hotswitch.backend.train.reference import OptimizerConfig

Control = Callable[[], list[dict]]
PAUSE_POLL_S = 0.2


class Trainer:
    def __init__(
        self,
        config: ModelConfig,
        data: BatchStream,
        plan: HotSwitchPlan,
        optim: OptimizerConfig | None = None,
        seed: int = 0,
        token_budget: int = 4096,
        sink: Sink = discard,
        control: Control | None = None,
        resume_from: str | Path | None = None,
        instantiation: str | Strategy | None = None,
    ):
        self.config, self.data, self.plan = config, data, plan
        self.rank = dist.get_rank()
        self.sink = sink if self.rank == 0 else discard
        self.control = control if control is not None and self.rank == 0 else (lambda: [])
        meta = checkpoint.read_meta(resume_from, config) if resume_from else None  # fail before any work
        chosen = Strategy.parse(instantiation) if instantiation else instantiation_strategy(plan.strategies)
        self.engine = Engine(config, plan.strategies, chosen, optim or OptimizerConfig(), seed, token_budget)
        self.step_index = 0
        if meta:
            checkpoint.load(self.engine, resume_from)
            self.data.load_state_dict(meta["data"])
            self.step_index = meta["step"]
        self._set_plan(plan, "buckets")
        self.sink(event("graphs", logical=summarize(self.engine.logical), exec=self._exec_summaries()))
        self.stopping = False

    # -- plan --------------------------------------------------------------------------------------
    def _set_plan(self, plan: HotSwitchPlan, source: str) -> None:
        self.engine.set_strategies(plan.strategies)
        self.plan = plan
        self.order = execution_order(plan.strategies, self.engine.instantiation, self._switch_cost)
        self.sink(
            event(
                "plan",
                step=self.step_index,
                buckets=[[str(b.strategy), b.above] for b in plan.buckets],
                order=[str(s) for s in self.order],
                instantiation=str(self.engine.instantiation),
                predicted_step_s=None,
                source=source,
            )
        )

    def _switch_cost(self, a: Strategy, b: Strategy) -> float:
        if a == b:
            return 0.0
        return self.engine._switch("params", a, b).predicted_s

    def _exec_summaries(self) -> dict:
        return {str(s): state.graph.summary() for s, state in self.engine.states.items()}

    # -- control ---------------------------------------------------------------------------------
    def _commands(self) -> list[dict]:
        box = [self.control() if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        return box[0] or []

    def _obey(self, commands: list[dict]) -> None:
        paused = False
        while True:
            for c in commands:
                kind = c.get("command")
                if kind == "switch":
                    self._set_plan(HotSwitchPlan.of(c["strategy"]), "fixed")
                elif kind == "pause":
                    paused = True
                elif kind == "resume":
                    paused = False
                elif kind == "stop":
                    self.stopping, paused = True, False
                elif kind == "checkpoint":
                    self.save(c.get("path"))
                else:
                    self.sink(event("warning", message=f"ignored unknown control command {c!r}"))
                    continue
                self.sink(event("control", step=self.step_index, **c))
            if not paused:
                return
            time.sleep(PAUSE_POLL_S)
            commands = self._commands()

    # -- checkpoints -------------------------------------------------------------------------------
    def save(self, path: str | Path | None) -> Path:
        if path is None:
            raise ValueError("a checkpoint needs a path")
        saved = checkpoint.save(
            self.engine,
            path,
            {
                "step": self.step_index,
                "data": self.data.state_dict(),
                "buckets": [[str(b.strategy), b.above] for b in self.plan.buckets],
            },
        )
        self.sink(event("checkpoint", step=self.step_index, path=str(saved)))
        return saved

    # -- the loop ----------------------------------------------------------------------------------
    def train(self, steps: int, on_step: Callable[[dict], None] | None = None) -> dict:
        """Train until ``steps`` steps in total (counting resumed ones) or a stop command."""
        started, tokens, last = time.perf_counter(), 0, None
        while self.step_index < steps and not self.stopping:
            self._obey(self._commands())
            if self.stopping:
                break
            batch = self.data.next_batch()
            groups = self.plan.assign(batch)
            began = time.perf_counter()
            loss, times = self.engine.step(groups, self.order)
            total = time.perf_counter() - began
            self.step_index += 1
            count = sum(s.length for s in batch)
            tokens += count
            last = event(
                "step",
                step=self.step_index,
                steps=steps,
                tokens=count,
                sequences=len(batch),
                loss=loss,
                grad_norm=self.engine.grad_norm,
                seconds={
                    "compute": times.compute,
                    "switch": times.switch,
                    "grad_sync": times.grad_sync,
                    "update": times.update,
                    "total": total,
                },
                tokens_per_s=count / total,
                strategies={
                    s: {**v, "tokens_per_s": v["tokens"] / v["seconds"] if v["seconds"] else 0.0}
                    for s, v in times.per_strategy.items()
                },
                switches=times.switches,
                predicted_step_s=None,
            )
            self.sink(last)
            if on_step:
                on_step(last)
        reason = "stopped" if self.stopping else "finished"
        done = event("done", step=self.step_index, reason=reason, seconds=time.perf_counter() - started, tokens=tokens)
        self.sink(done)
        return done
