"""Deduction rules: from the placements of an op's inputs along one mesh dim, the
placements the op needs, whether each input's local gradient comes out partial,
and the placement of its output.

One rule per op kind, written once for any mesh dim (data and tensor parallel
alike); placements are ``Shard(d)`` / ``Replicate()`` / ``Partial()`` of the
tensors' dims, with ``d`` non-negative. Sequence parallelism swaps in two rules along
the tensor-parallel dim (norm and residual add keep the sequence split); the rest of
Megatron-SP (all-gather before column-parallel linears, reduce-scatter after
row-parallel ones) follows from the ordinary rules. Context parallelism swaps in two rules
along the cp dim: rotary embedding and attention run on a split of the sequence (the compiler
gives them the tokens' true positions and ring or Ulysses attention). Where an input's placement differs from
what the op needs, the logical graph inserts a comm node that converts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotswitch.backend.dist_state import Partial, Placement, Replicate, Shard
from hotswitch.backend.runtime.collectives import CommKind

R = Replicate()
P = Partial()


@dataclass(frozen=True)
class Deduction:
    required: tuple[Placement, ...]  # what each input must be
    grad_partial: tuple[bool, ...]  # each input's local gradient is a partial sum (forward stays Replicate)
    out: Placement


class NoRule(Exception):
    """The op cannot run on inputs placed this way."""


def _same(required, out, grad_partial=None) -> Deduction:
    return Deduction(tuple(required), tuple(grad_partial or [False] * len(required)), out)


def _sharded(p: Placement, dim: int) -> bool:
    return isinstance(p, Shard) and p.dim == dim


def linear(ins, shapes, node) -> Deduction:
    x, w = ins
    last = len(shapes[0]) - 1
    if w == R:  # x split along another dim (a shared expert's gate under sp): each rank's weight gradient is partial
        x = R if _sharded(x, last) else x
        return _same([x, R], x, [False, isinstance(x, Shard)])
    if _sharded(w, 0):  # column-parallel: the output features are split
        return _same([R, w], Shard(last), [True, False])
    if _sharded(w, 1):  # row-parallel: the input features are split, the outputs are summands
        return _same([Shard(last), w], P)
    raise NoRule(f"linear weight placed {w}")


def embedding(ins, shapes, node) -> Deduction:
    tokens, w = ins
    if w == R:
        return _same([tokens, R], tokens)
    if _sharded(w, 0):  # vocab-parallel: each rank looks up its rows, zeros elsewhere
        return _same([R, w], P)
    raise NoRule(f"embedding weight placed {w}")


def rms_norm(ins, shapes, node) -> Deduction:
    """Normalises over the last dim, which must be whole. Split along another dim (heads under
    tp for a per-head q/k norm, rows, the sequence), each rank's weight gradient covers its part
    only: a partial sum (the trainer sums the dp and cp ones itself)."""
    x = ins[0]
    if x == P or _sharded(x, len(shapes[0]) - 1):
        x = R
    return _same([x, R], x, [False, isinstance(x, Shard)])


def bias(ins, shapes, node) -> Deduction:
    """x [..., features] + bias [features]: the bias is split where the features are; a split of
    x along another dim sees all of it and gives a partial gradient; a partial sum is completed
    first (the bias is added once)."""
    x, b = ins
    last = len(shapes[0]) - 1
    if _sharded(x, last) or _sharded(b, 0):
        return _same([Shard(last), Shard(0)], Shard(last))
    x = R if x == P else x
    return _same([x, R], x, [False, isinstance(x, Shard)])


def scale(ins, shapes, node) -> Deduction:
    (x,) = ins  # times a constant: linear, so any placement passes through, partial sums too
    return _same([x], x)


def unflatten(ins, shapes, node) -> Deduction:
    (x,) = ins  # splits the last dim; a shard of it becomes a shard of the outer new dim
    return _same([x], x)


def flatten(ins, shapes, node) -> Deduction:
    (x,) = ins  # merges the last two dims; only a shard of the outer one survives
    if _sharded(x, len(shapes[0]) - 1):
        x = R
    return _same([x], x)


def rotary(ins, shapes, node) -> Deduction:
    x = ins[0]  # positions follow dim 1, pairs span the last dim: neither may be split
    if _sharded(x, 1) or _sharded(x, len(shapes[0]) - 1):
        x = R
    return _same([x, R, R, R], x)  # the tables, and the whole rows' positions (``POSITIONS``)


def attention(ins, shapes, node) -> Deduction:
    q = ins[0]  # independent per batch row and per head: dims 0 and 2
    allowed = q == R or _sharded(q, 0) or _sharded(q, 2)
    q = q if allowed else R
    return _same([q, q, q, R], q)  # the whole rows' positions say where documents start


def experts(ins, shapes, node) -> Deduction:
    """A mixture of experts works token by token (x [..., dim], then the router and the experts'
    weights): x split along any dim but the last passes through, each rank routing its own
    tokens with every expert replicated, its weight gradients covering those tokens only (partial
    sums, as a norm's). A partial sum or a split of the features is completed first."""
    x = ins[0]
    if x == P or _sharded(x, len(shapes[0]) - 1):
        x = R
    weights = len(ins) - 1
    return _same([x, *[R] * weights], x, [False, *[isinstance(x, Shard)] * weights])


def nonlinear_unary(ins, shapes, node) -> Deduction:
    x = R if ins[0] == P else ins[0]
    return _same([x], x)


def _common(a: Placement, b: Placement) -> Placement:
    """The placement two operands of an elementwise op meet in: a split of a replicated
    operand is local, a sum of partials must be completed."""
    if a == b:
        return a
    for p in (a, b):
        if isinstance(p, Shard) and R in (a, b):
            return p
    return R


def add(ins, shapes, node) -> Deduction:
    if len(shapes) != 2 or len(shapes[0]) != len(shapes[1]):
        raise NoRule("broadcasting add")
    common = _common(*ins)
    return _same([common, common], common)


def mul(ins, shapes, node) -> Deduction:
    if len(shapes) != 2 or len(shapes[0]) != len(shapes[1]):
        raise NoRule("broadcasting mul")
    common = _common(*(R if p == P else p for p in ins))
    return _same([common, common], common)


def loss(ins, shapes, node) -> Deduction:
    logits, targets = ins
    vocab = len(shapes[0]) - 1
    if _sharded(logits, vocab):  # vocab-parallel cross-entropy: the same summed loss on every rank
        return _same([logits, R], R)
    for dim in (0, 1):  # rows (dp) or the sequence (cp): each rank sums its own tokens
        if _sharded(logits, dim) or _sharded(targets, dim):
            return _same([Shard(dim), Shard(dim)], P)
    return _same([R, R], R)


def _positional(node, first: int) -> list:
    """The traced call's arguments from position ``first`` on (dims of transpose/permute)."""
    args = list(node.fx_node.args[first:])
    return list(args[0]) if len(args) == 1 and isinstance(args[0], list | tuple) else args


def transpose(ins, shapes, node) -> Deduction:
    (x,) = ins
    n = len(shapes[0])
    a, b = (d % n for d in _positional(node, 1)[:2])
    out = Shard({a: b, b: a}.get(x.dim, x.dim)) if isinstance(x, Shard) else x
    return _same([x], out)


def permute(ins, shapes, node) -> Deduction:
    (x,) = ins
    n = len(shapes[0])
    order = [d % n for d in _positional(node, 1)]
    out = Shard(order.index(x.dim)) if isinstance(x, Shard) else x
    return _same([x], out)


def reshape(ins, shapes, node) -> Deduction:
    """A shard survives when its dim is the outermost of a group of dims the reshape keeps,
    merges or splits: same product of sizes before it on both sides."""
    (x,) = ins
    if not isinstance(x, Shard):
        return _same([x], x)
    before = [1]
    after = [1]
    for n in shapes[0]:
        before.append(before[-1] * n)
    for n in node.shape:
        after.append(after[-1] * n)
    if before[x.dim] in after[:-1] and node.shape[after.index(before[x.dim])] > 1:
        return _same([x], Shard(after.index(before[x.dim])))
    return _same([R], R)


def matmul(ins, shapes, node) -> Deduction:
    """a [..., m, k] @ b [..., k, n]: batch, m and n shards pass through, a shard of k on
    both sides gives partial sums; anything else is gathered first."""
    a, b = ins
    na = len(shapes[0])
    nb = len(shapes[1])
    out_n = max(na, nb)
    if (a == P and b == R) or (a == R and b == P):
        return _same([a, b], P)
    if _sharded(a, na - 1) and _sharded(b, nb - 2):
        return _same([a, b], P)
    if isinstance(a, Shard) and a.dim < na - 1 and b == R:  # each rank's rows give part of b's gradient
        return _same([a, R], Shard(a.dim + out_n - na), [False, True])
    if a == R and _sharded(b, nb - 1):
        return _same([R, b], Shard(out_n - 1), [True, False])
    return _same([R, R], R)


def _residual(p: Placement, seq: int) -> bool:
    return p == P or _sharded(p, seq)


def sequence_parallel_rms_norm(ins, shapes, node) -> Deduction:
    """Megatron-SP: a norm of the residual stream [batch, seq, dim] runs on a split of the
    sequence (partial sums are reduce-scattered into it), so each rank's gradient of the
    replicated weight covers its tokens only. Norms inside attention (q/k norms) are ordinary."""
    seq = 1
    if len(shapes[0]) == 3 and _residual(ins[0], seq):
        return _same([Shard(seq), R], Shard(seq), [False, True])
    return rms_norm(ins, shapes, node)


def sequence_parallel_add(ins, shapes, node) -> Deduction:
    """Megatron-SP: the residual stream stays split along the sequence; a row-parallel
    output (a partial sum) is reduce-scattered into it."""
    seq = 1
    if len(shapes) == 2 and len(shapes[0]) == len(shapes[1]) == 3 and all(_residual(p, seq) for p in ins):
        return _same([Shard(seq), Shard(seq)], Shard(seq))
    return add(ins, shapes, node)


def context_parallel_rotary(ins, shapes, node) -> Deduction:
    """Context parallelism: each rank rotates its zig-zag chunks at their true positions."""
    if _sharded(ins[0], 1):
        return _same([ins[0], R, R, R], ins[0])
    return rotary(ins, shapes, node)


def context_parallel_attention(ins, shapes, node) -> Deduction:
    """Context parallelism: ring (or Ulysses) attention over the sequence's zig-zag chunks."""
    if _sharded(ins[0], 1):
        return _same([ins[0]] * 3 + [R], ins[0])
    return attention(ins, shapes, node)


RULES = {
    "transpose": transpose,
    "permute": permute,
    "reshape": reshape,
    "matmul": matmul,
    "linear": linear,
    "embedding": embedding,
    "rms_norm": rms_norm,
    "unflatten": unflatten,
    "flatten": flatten,
    "rotary": rotary,
    "attention": attention,
    "experts": experts,
    "silu": nonlinear_unary,
    "gelu": nonlinear_unary,
    "sigmoid": nonlinear_unary,
    "bias": bias,
    "scale": scale,
    "add": add,
    "mul": mul,
    "loss": loss,
}

SEQUENCE_PARALLEL_RULES = {**RULES, "rms_norm": sequence_parallel_rms_norm, "add": sequence_parallel_add}
CONTEXT_PARALLEL_RULES = {**RULES, "rotary": context_parallel_rotary, "attention": context_parallel_attention}


def conversion(actual: Placement, required: Placement, grad_partial: bool) -> tuple[CommKind, int | None] | None:
    """The collective turning ``actual`` into ``required`` (with the gradient conjugate the
    consumer needs), as (kind, tensor dim), or None when nothing is needed."""
    if actual == required:
        return ("copy", None) if grad_partial and actual == R else None
    if actual == P and required == R:
        return ("all_reduce_ar" if grad_partial else "all_reduce"), None
    if isinstance(actual, Shard) and required == R:
        return ("all_gather_rs" if grad_partial else "all_gather"), actual.dim
    if actual == R and isinstance(required, Shard):
        return "split", required.dim
    if actual == P and isinstance(required, Shard):
        return "reduce_scatter", required.dim
    raise NoRule(f"no collective turns {actual} into {required}")
