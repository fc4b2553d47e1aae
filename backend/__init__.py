"""The hot-switch engine: strategies, layouts, switch planning and execution, training.

Pure torch; never imports Jupyter code. Names are imported on first use, so that the pure
planning parts (strategies, clusters, the switch planner) load without torch. The names below,
with those of ``backend.data``, ``backend.models``, ``backend.sim``, ``backend.sim.paper``,
``hotswitch.widgets`` and ``hotswitch.kernel`` (``api.PUBLIC``), are the public API: notebooks,
the README and the docs import nothing else, and a module may move behind them.
"""

from hotswitch.backend.lazy_import import lazy_exports

_EXPORTS = {
    # training: a run from its settings, the trainer it builds, the one-device reference
    "run": "hotswitch.backend.train.run.recipe",
    "build": "hotswitch.backend.train.run.recipe",
    "run_batches": "hotswitch.backend.train.run.recipe:batches",
    "RUN_DEFAULTS": "hotswitch.backend.train.run.spec:DEFAULTS",
    "RunConfig": "hotswitch.backend.train.config.run_config",
    "Trainer": "hotswitch.backend.train.loop.trainer",
    "WarmTrainer": "hotswitch.backend.train.loop.warm",
    "ReferenceTrainer": "hotswitch.backend.train.loop.reference",
    "OptimizerConfig": "hotswitch.backend.train.state.optim",
    "compare_strategies": "hotswitch.backend.train.loop.compare:compare",
    "summarize_run": "hotswitch.backend.train.loop.run_totals:summarize",
    "budget_holding": "hotswitch.backend.train.planning.memory",
    "execution_order": "hotswitch.backend.train.planning.dispatch",
    "instantiation_strategy": "hotswitch.backend.train.planning.dispatch",
    # the cluster, strategies and where each parameter lives under them
    "Cluster": "hotswitch.backend.cluster",
    "Strategy": "hotswitch.backend.strategy",
    "Box": "hotswitch.backend.dist_state",
    "DistState": "hotswitch.backend.dist_state",
    "Partial": "hotswitch.backend.dist_state",
    "Replicate": "hotswitch.backend.dist_state",
    "Shard": "hotswitch.backend.dist_state",
    "ParamLayout": "hotswitch.backend.layout",
    "param_layout": "hotswitch.backend.layout",
    # models
    "CONFIGS": "hotswitch.backend.models.config",
    "ModelConfig": "hotswitch.backend.models.config",
    "get_config": "hotswitch.backend.models.config",
    # the logical graph and each rank's executable graph
    "LogicalGraph": "hotswitch.backend.graph.logical",
    "summarize_graph": "hotswitch.backend.graph.logical:summarize",
    "compile_graph": "hotswitch.backend.graph.compile",
    # switch planning
    "SWITCH_ALGORITHMS": "hotswitch.backend.switch:ALGORITHMS",
    "SwitchPlan": "hotswitch.backend.switch.plan",
    "SwitchPlanner": "hotswitch.backend.switch.planner",
    "model_layouts": "hotswitch.backend.switch.planner",
    "plan_switch": "hotswitch.backend.switch.planner",
    "switch_bounds": "hotswitch.backend.switch.planner",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
