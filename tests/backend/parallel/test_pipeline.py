"""The pipeline runtime drives any ``PipelineStage``; the compiled graph is one."""

from hotswitch.backend import get_config
from hotswitch.backend.graph.compile import compile_graph
from hotswitch.backend.graph.logical import LogicalGraph
from hotswitch.backend.parallel.pipeline import PipelineStage, bubble_fraction, gpipe, one_f_one_b


def test_an_executable_graph_is_a_pipeline_stage():
    graph = LogicalGraph.build(get_config("tiny"), ["tp2pp2"])
    for rank in range(4):
        assert isinstance(compile_graph(graph, "tp2pp2", rank), PipelineStage)


def test_schedules_run_every_pass_once_and_1f1b_warms_up_by_the_stages_below():
    for stage in range(4):
        for schedule in (gpipe, one_f_one_b):
            order = schedule(4, stage, 6)
            assert sorted((p.kind, p.micro) for p in order) == sorted((k, m) for k in "FB" for m in range(6))
        first_backward = [p.kind for p in one_f_one_b(4, stage, 6)].index("B")
        assert first_backward == 4 - stage
    assert bubble_fraction(4, 6) == 3 / 9
