"""Rank functions for the family tests (importable by spawned processes): each family's
decoder trained by the engine under hot-switched plans, beside the one-device reference."""

import torch

from hotswitch.backend.data.stream import Sequence
from hotswitch.backend.models.config import ModelConfig
from hotswitch.backend.models.hf import hf_initializer
from hotswitch.backend.train.config.run_config import engine_run
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.loop.reference import ReferenceTrainer
from hotswitch.backend.train.planning.dispatch import HotSwitchPlan, execution_order, instantiation_strategy
from hotswitch.backend.train.state.optim import OptimizerConfig

SEED, BUDGET, STEPS = 0, 96, 2
LENGTHS = [40, 36, 30, 22, 17, 12, 9, 6]  # every bucket of the plans below trains some


def batches(config: ModelConfig, steps: int = STEPS) -> list[list[Sequence]]:
    generator = torch.Generator().manual_seed(7)
    return [
        [
            Sequence(i, tuple(torch.randint(0, config.vocab_size, (n + 1,), generator=generator).tolist()))
            for i, n in enumerate(LENGTHS[step:] + LENGTHS[:step])
        ]
        for step in range(steps)
    ]


def reference(
    config: ModelConfig, checkpoint=None
) -> tuple[list[float], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """One device: per-step losses, step 1's gradients before clipping (zero for a frozen weight,
    which gets none), the final weights; from ``checkpoint``'s weights where given."""
    initial = None if checkpoint is None else hf_initializer(checkpoint)
    trainer = ReferenceTrainer(config, OptimizerConfig(), SEED, BUDGET, initial=initial)
    grads: list[dict[str, torch.Tensor]] = []

    def keep(model) -> None:
        grads.append(
            {n: torch.zeros_like(p) if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
        )

    losses = [trainer.step(batch, before_update=keep) for batch in batches(config)]
    return losses, grads[0], {n: p.detach().clone() for n, p in trainer.model.named_parameters()}


def family_runs(
    rank: int, world: int, configs: dict[str, ModelConfig], plans: dict[str, list], checkpoints: dict | None = None
):
    """Per family: (losses, step 1's gradients, final weights, strategies that trained) of the
    engine under the family's plan, on rank 0; from the weights of its entry in ``checkpoints``
    where it has one."""
    out = {}
    for name, config in configs.items():
        plan = HotSwitchPlan.of(plans[name])
        instantiation = instantiation_strategy(plan.strategies)
        folder = (checkpoints or {}).get(name)
        initial = None if folder is None else hf_initializer(folder)
        engine = Engine(config, plan.strategies, instantiation, engine_run(BUDGET, seed=SEED), initial=initial)
        order = execution_order(plan.strategies, instantiation, lambda a, b: 0.0)
        losses, grads, used = [], [], set()
        for batch in batches(config):
            groups = plan.assign(batch)
            used |= {str(s) for s, seqs in groups.items() if seqs}
            losses.append(engine.step(groups, order, lambda m, keep=grads: keep.append(m.global_grads())).loss)
        params = engine.master.global_params()  # collective: every rank gathers
        out[name] = (losses, grads[0], params, sorted(used)) if rank == 0 else None
    return out


def sft_runs(rank: int, world: int, specs: dict[str, dict], folder: str):
    """Per family: each step's loss of fine-tuning on conversations through the recipe, then
    the export (``export_hf``), on rank 0."""
    import os

    from hotswitch.backend.train.run.recipe import ENV_NOTEBOOK_DIR, build, export_hf

    os.environ[ENV_NOTEBOOK_DIR] = folder
    out = {}
    for name, spec in specs.items():
        events: list[dict] = []
        trainer, checked = build(spec, events.append)
        trainer.train(checked["steps"])
        export_hf(trainer, checked)
        out[name] = [e["loss"] for e in events if e["type"] == "step"]
    return out if rank == 0 else None
