"""Attention's kernel, chosen by measurement and put in force process-wide: the choice is the
fastest of what was timed, a named kernel runs, and a kernel that plans per shape sees lengths
rounded up to a short ladder, and one faster with repeated heads is handed them, without changing
a value (forward or backward)."""

import pytest
import torch

from hotswitch.backend.models.attention import kernels
from hotswitch.backend.models.attention.flex import document_mask, flex_causal_attention
from hotswitch.backend.models.attention.varlen import document_offsets
from hotswitch.backend.models.documents import row_positions
from hotswitch.backend.models.llama import causal_attention, fused_causal_attention

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@pytest.fixture(autouse=True)
def restore():
    before = kernels.in_force()
    yield
    kernels.use(before)


def test_lengths_round_up_to_a_ladder_of_few_shapes():
    assert [kernels.rounded(n) for n in (1, 128, 129, 1024, 1025, 1153, 2049, 32768, 32769)] == [
        128, 128, 256, 1024, 1152, 1280, 2304, 32768, 36864,
    ]  # fmt: skip
    assert len({kernels.rounded(n) for n in range(1, 32769)}) == 8 + 8 * 5  # eight shapes an octave
    assert all(n <= kernels.rounded(n) <= n * 1.125 + 128 for n in range(1, 40000, 7))


def test_the_choice_is_the_fastest_timed_and_is_put_in_force():
    heads = (8, 4, 16)
    choice = kernels.choose(torch.device("cpu"), torch.float32, heads, [64, 200], candidates=("flash", "math"))
    timed = {name: s for name, s in choice.seconds.items() if s is not None}
    assert set(timed) == {"flash", "math"} and all(s > 0 for s in timed.values())
    assert choice.kernel == min(timed, key=timed.__getitem__) and kernels.in_force() is choice
    assert choice.lengths == [64, 200] and not choice.alone
    assert kernels.choose(torch.device("cpu"), torch.float32, heads, [64]).seconds.keys() == {"flash"}


def test_where_heads_race_each_kernel_is_timed_with_grouped_and_repeated_heads(monkeypatch):
    """On a GPU a kernel may be faster with keys and values repeated (or take no grouped heads):
    both forms are timed, the choice is one of them and attention runs it; equal heads have one
    form."""
    monkeypatch.setattr(kernels, "REPEATS_RACE", {"cpu"})
    cpu = torch.device("cpu")
    choice = kernels.choose(cpu, torch.float32, (8, 4, 16), [64], candidates=("flash", "math"))
    forms = ["flash", "flash (heads repeated)", "math", "math (heads repeated)"]
    assert sorted(choice.seconds) == forms and all(s is not None for s in choice.seconds.values())
    assert choice.label in forms and kernels.in_force() is choice  # which: the next test, on set times
    assert choice.repeats_heads == choice.label.endswith("(heads repeated)")
    same = kernels.choose(cpu, torch.float32, (8, 8, 16), [64], candidates=("flash", "math"))
    assert sorted(same.seconds) == ["flash", "math"] and not same.repeats_heads


@pytest.mark.parametrize(("repeated_s", "chosen"), [(0.97, "flash"), (0.90, "flash (heads repeated)")])
def test_repeated_heads_are_chosen_only_where_clearly_faster(monkeypatch, repeated_s, chosen):
    """Repeated heads keep copies for backward: within ``REPEAT_GAIN`` of the grouped form,
    the grouped form runs; a kernel refusing grouped heads still runs repeated."""
    monkeypatch.setattr(kernels, "REPEATS_RACE", {"cpu"})
    times = {"flash": 1.0, "flash (heads repeated)": repeated_s, "math": None, "math (heads repeated)": 1.5}
    monkeypatch.setattr(kernels, "_time_kernel", lambda form, *args: times[form.label])
    choice = kernels.choose(torch.device("cpu"), torch.float32, (8, 4, 16), [64], candidates=("flash", "math"))
    assert choice.label == chosen and choice.seconds == times
    times["flash"] = None
    assert kernels.choose(torch.device("cpu"), torch.float32, (8, 4, 16), [64], ("flash", "math")).label == (
        "flash (heads repeated)"
    )


def test_a_kernel_is_named_or_refused_with_the_known_ones():
    kernels.use("math")
    assert kernels.attention_backends()[0] == kernels.KERNELS["math"]
    with pytest.raises(ValueError, match="unknown attention kernel 'fast': choose one of flash, efficient, cudnn"):
        kernels.use("fast")


def test_rounded_lengths_and_repeated_heads_change_no_value_forward_or_backward(monkeypatch):
    q, k, v = (torch.randn(2, 300, h, 16, dtype=torch.float64, requires_grad=True) for h in (8, 4, 4))

    def attend():
        out = fused_causal_attention(q, k, v)
        return out, torch.autograd.grad(out.square().sum(), (q, k, v))

    kernels.use("math")
    plain, plain_grads = attend()
    monkeypatch.setattr(kernels, "PLANS_PER_SHAPE", {"math"})  # as cuDNN's: 300 tokens run as 384,
    kernels.use(kernels.AttentionChoice("math", repeats_heads=True))  # keys and values per query head
    assert kernels.in_force().rounds_lengths and kernels.in_force().label == "math (heads repeated)"
    padded, padded_grads = attend()
    assert padded.shape == plain.shape and torch.allclose(padded, plain, rtol=0, atol=1e-12)
    for a, b in zip(padded_grads, plain_grads, strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)


@GPU
def test_on_a_gpu_every_kernel_the_choice_weighs_agrees_with_flash_in_bf16():
    heads = (8, 4, 64)
    choice = kernels.choose(torch.device("cuda"), torch.bfloat16, heads, [300, 1100])
    assert choice.kernel in kernels.CANDIDATES["cuda"] and choice.seconds[choice.label] is not None
    assert {"cudnn", "cudnn (heads repeated)", "flash", "flash (heads repeated)"} <= set(choice.seconds)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 1100, h, 64, generator=g).to("cuda", torch.bfloat16) for h in (8, 4, 4))
    kernels.use("flash")
    reference = fused_causal_attention(q, k, v).float()
    for label, seconds in choice.seconds.items():
        if seconds is not None:  # cuDNN's runs rounded: 1,100 tokens as 1,152; heads grouped or repeated
            kernel = label.split()[0]
            kernels.use(kernels.AttentionChoice(kernel, repeats_heads=label != kernel))
            assert torch.allclose(fused_causal_attention(q, k, v).float(), reference, rtol=2e-2, atol=2e-2), label


def packed_row(device: str, dtype: torch.dtype, grad: bool):
    documents = [70, 100, 30, 56]  # three boundaries inside FlexAttention's 128-token blocks
    positions = row_positions(documents)[None]
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 256, h, 16, generator=g).to(device, dtype).requires_grad_(grad) for h in (8, 4, 4))
    return q, k, v, positions


def test_one_flex_call_attends_a_packed_row_as_one_call_per_document_does():
    q, k, v, positions = packed_row("cpu", torch.float32, grad=False)  # FlexAttention's CPU backward: none
    with torch.no_grad():
        flex = flex_causal_attention(q, k, v, positions)
        kernels.use(kernels.AttentionChoice("flash", documents="per_document"))
        each = causal_attention(q, k, v, positions)
    assert torch.allclose(flex, each, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "documents, length",
    [([300, 200, 12], None), ([128, 128, 256], None), ([1000], None), ([5] * 20 + [412], None), ([129, 127, 300], 600)],
)
def test_the_document_block_mask_is_the_one_create_block_mask_builds_pair_by_pair(documents, length):
    """Block boundaries on and off documents' ends, a row cut short of a whole block, padding, and
    rows that differ: every block list equal to what evaluating the mask at each pair gives."""
    from torch.nn.attention.flex_attention import create_block_mask

    positions = torch.stack([row_positions(documents, length), row_positions(documents[::-1], length)])
    numbers = (positions == 0).cumsum(-1)

    def causal_in_document(b, h, q, kv):
        return (q >= kv) & (numbers[b, q] == numbers[b, kv])

    whole = positions.shape[1]
    expected = create_block_mask(causal_in_document, 2, None, whole, whole, device="cpu")
    built = document_mask(positions, torch.device("cpu"))
    for lists in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices"):
        assert torch.equal(getattr(built, lists), getattr(expected, lists)), lists
    assert built.seq_lengths == (whole, whole) and built.full_kv_num_blocks.sum() > 0  # whole blocks skip the mask


def test_packed_rows_attend_per_document_on_the_cpu_and_the_choice_says_what_it_timed():
    choice = kernels.choose(torch.device("cpu"), torch.float32, (8, 4, 16), [128], packed_row=300)
    assert choice.documents == "per_document" and choice.document_seconds["per_document"] > 0
    assert kernels.halving_documents(300) == [150, 75, 37, 38] and kernels.in_force() is choice


@GPU
@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("documents", ["varlen", "flex"])
def test_on_a_gpu_one_call_trains_packed_rows_as_one_call_per_document_does(documents, rows):
    """bf16, grouped heads; with 3 rows the last is padded (its last document runs on)."""
    positions = torch.stack([row_positions([70, 100, 30, 56]), row_positions([256]), row_positions([200], 256)])
    positions = positions[:rows]
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(rows, 256, h, 64, generator=g).to("cuda", torch.bfloat16) for h in (8, 4, 4))
    out = {}
    for way in (documents, "per_document"):
        kernels.use(kernels.AttentionChoice("flash", documents=way))
        inputs = [x.clone().requires_grad_() for x in (q, k, v)]
        attended = causal_attention(*inputs, positions)
        out[way] = attended.float(), torch.autograd.grad(attended.float().square().sum(), inputs)
    (one, one_grads), (each, each_grads) = out[documents], out["per_document"]
    assert torch.allclose(one, each, rtol=2e-2, atol=2e-2)
    for a, b in zip(one_grads, each_grads, strict=True):
        assert torch.allclose(a.float(), b.float(), rtol=5e-2, atol=5e-2)


def test_the_cpu_never_weighs_the_variable_length_kernel_and_its_offsets_cut_every_row():
    assert "varlen" not in kernels.DOCUMENT_CANDIDATES["cpu"] and "varlen" in kernels.DOCUMENT_CANDIDATES["cuda"]
    positions = torch.stack([row_positions([3, 5]), row_positions([8]), row_positions([2], 8)])
    offsets, longest = document_offsets(positions, torch.device("cpu"))
    assert offsets.tolist() == [0, 3, 8, 16, 24] and longest == 8 and offsets.dtype == torch.int32


def test_an_engine_after_the_first_reuses_the_choice_made_for_the_same_shapes():
    cpu, heads = torch.device("cpu"), (8, 4, 16)
    first = kernels.chosen(cpu, torch.float32, heads, [64], None)
    kernels.use("math")
    assert kernels.chosen(cpu, torch.float32, heads, [64], None) is first and kernels.in_force() is first
    assert kernels.chosen(cpu, torch.float32, heads, [128], None) is not first  # other shapes: timed anew


@pytest.mark.parametrize("crosses", [True, False])
def test_a_one_call_way_of_attending_documents_is_chosen_only_where_it_agrees_with_per_document_calls(
    monkeypatch, crosses
):
    """A stand-in for flash's variable-length kernel on the CPU: one that lets attention cross
    documents is left out with a warning, whatever it took; a faithful one is weighed."""
    from hotswitch.backend.models import llama
    from hotswitch.backend.models.documents import per_document, spans

    def stand_in(q, k, v, positions):
        if crosses:
            return fused_causal_attention(q, k, v)
        return per_document(fused_causal_attention, q, k, v, spans(positions))

    monkeypatch.setattr(llama, "varlen_causal_attention", stand_in)
    monkeypatch.setitem(kernels.DOCUMENT_CANDIDATES, "cpu", ("per_document", "varlen"))
    if crosses:
        with pytest.warns(UserWarning, match="varlen attention is .* from per-document calls"):
            choice = kernels.choose(torch.device("cpu"), torch.float32, (8, 4, 16), [128], packed_row=1024)
        assert choice.document_seconds["varlen"] is None and choice.documents == "per_document"
    else:
        choice = kernels.choose(torch.device("cpu"), torch.float32, (8, 4, 16), [128], packed_row=1024)
        assert choice.document_seconds["varlen"] > 0 and choice.documents in ("per_document", "varlen")
