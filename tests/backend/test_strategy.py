import pytest

from hotswitch.backend import Cluster, Strategy


@pytest.mark.parametrize(
    ("text", "degrees"),
    [("dp2tp2pp1", (2, 2, 1)), ("tp4", (1, 4, 1)), ("dp4", (4, 1, 1)), ("TP2PP2", (1, 2, 2)), ("pp2dp2", (2, 1, 2))],
)
def test_parse(text, degrees):
    s = Strategy.parse(text)
    assert (s.dp, s.tp, s.pp) == degrees
    assert Strategy.parse(str(s)) == s


def test_format_is_canonical():
    assert str(Strategy(dp=2, tp=2)) == "dp2tp2pp1"


def test_sequence_parallelism_parses_and_needs_tensor_parallelism():
    s = Strategy.parse("dp2tp2sp")
    assert (s.dp, s.tp, s.pp, s.sp) == (2, 2, 1, True)
    assert str(s) == "dp2tp2pp1sp" and Strategy.parse(str(s)) == s
    assert s != Strategy.parse("dp2tp2")
    with pytest.raises(ValueError, match="needs tp > 1"):
        Strategy.parse("dp4sp")


@pytest.mark.parametrize(
    "text", ["", "dp", "dp2dp2", "dp0", "zz4", "dp2 tp2", "dp2x", "sp", "tp2spsp", "tp2sptp2", "cp2ul2", "tp2selsp"]
)
def test_parse_rejects(text):
    with pytest.raises(ValueError, match=r"dp2cp2tp2pp1|positive"):
        Strategy.parse(text)


def test_mesh_is_pp_dp_tp_with_tp_fastest():
    s = Strategy(dp=2, tp=2, pp=2)
    assert [s.coords(r) for r in range(8)] == [
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (0, 1, 0, 0),
        (0, 1, 0, 1),
        (1, 0, 0, 0),
        (1, 0, 0, 1),
        (1, 1, 0, 0),
        (1, 1, 0, 1),
    ]
    assert all(s.rank_of(*s.coords(r)) == r for r in range(8))
    assert s.tp_group(5) == (4, 5)
    assert s.dp_group(5) == (5, 7)
    assert s.stage_ranks == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_context_parallel_mesh_is_pp_dp_cp_tp_with_cp_next_to_tp():
    s = Strategy.parse("dp2cp2tp2")
    assert (s.dp, s.cp, s.tp, s.world_size, str(s)) == (2, 2, 2, 8, "dp2cp2tp2pp1")
    assert s.coords(5) == (0, 1, 0, 1) and s.coords(5).cp == 0 and s.coords(2).cp == 1
    assert all(s.rank_of(*s.coords(r)) == r for r in range(8))
    assert s.tp_group(5) == (4, 5) and s.cp_group(5) == (5, 7) and s.dp_group(5) == (1, 5)
    assert s.replica_group(5) == (1, 3, 5, 7) and s.replica_index(7) == 3
    ulysses = Strategy.parse("ul4")
    assert ulysses.cp == 4 and ulysses.ulysses and str(ulysses) == "dp1ul4tp1pp1"
    assert Strategy.parse(str(ulysses)) == ulysses


def test_recompute_flags():
    assert str(Strategy.parse("tp4spsel")) == "dp1tp4pp1spsel"
    with pytest.raises(ValueError, match=r"selective recompute \(sel\) and full activation checkpointing \(ckpt\)"):
        Strategy.parse("tp2ckptsel")
    with pytest.raises(ValueError, match="needs cp > 1"):
        Strategy(ulysses=True)


def test_fit_error_names_the_fix():
    with pytest.raises(ValueError, match="product dp\\*cp\\*tp\\*pp is 8"):
        Strategy.parse("dp2tp2").check_fits(8)


def test_cluster_presets():
    paper = Cluster.a800()
    assert paper.world_size == 32 and paper.nodes == 4
    assert paper.intra_bw == 400e9 and paper.inter_bw == 200e9
    assert Cluster.of_gpus(8).nodes == 1 and Cluster.of_gpus(16).nodes == 2
    local = Cluster.local(4, nodes=2)
    assert [local.node_of(r) for r in range(4)] == [0, 0, 1, 1]
    with pytest.raises(ValueError, match="3 virtual nodes"):
        Cluster.local(4, nodes=3)
    with pytest.raises(ValueError, match="outside this cluster"):
        local.node_of(4)


def test_a_strategy_pickled_in_one_process_keys_the_same_dicts_in_another():
    """Ranks receive plans pickled on rank 0, each strategy with its cached hash; a hash that
    differs between processes (Python 3.11's hash(None)) made ranks disagree on a plan and hang."""
    import pickle
    import subprocess
    import sys

    sent = [Strategy.parse(text) for text in ("tp2", "dp2@2-3")]
    for s in sent:
        hash(s)  # cached, so that it travels with the pickle
    check = (
        "import pickle, sys\n"
        "from hotswitch.backend.strategy import Strategy\n"
        "got = pickle.loads(sys.stdin.buffer.read())\n"
        "local = {Strategy.parse('tp2'): 0, Strategy.parse('dp2@2-3'): 1}\n"
        "print([local.get(s) for s in got])\n"
    )
    done = subprocess.run([sys.executable, "-c", check], input=pickle.dumps(sent), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "[0, 1]"
