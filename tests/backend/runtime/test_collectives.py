"""Collectives: one autograd Function per kind, whose backward is its forward's conjugate."""

import re

import torch

from hotswitch.backend.runtime.collectives import COLLECTIVES, KINDS
from hotswitch.backend.runtime.spawn import spawn_ranks

from .collective_workers import every_collective, rank_grad, rank_input

WORLD = 2


def test_every_kind_has_one_function_saying_forward_and_backward():
    assert set(COLLECTIVES) == set(KINDS)
    for kind, function in COLLECTIVES.items():
        assert issubclass(function, torch.autograd.Function), kind
        assert re.fullmatch(r"forward: [^;]+; backward: [^;]+\.", function.__doc__ or ""), function.__name__


def test_forward_and_backward_of_every_kind_on_gloo():
    results = spawn_ranks(every_collective, WORLD)
    xs = [rank_input(r) for r in range(WORLD)]
    whole = torch.cat(xs)  # what a gather along dim 0 gives
    for r, result in enumerate(results):

        def grads(shape):
            return [rank_grad(q, shape) for q in range(WORLD)]

        expected = {
            "all_reduce": (sum(xs), grads((4, 2))[r]),
            "all_reduce_ar": (sum(xs), sum(grads((4, 2)))),
            "copy": (xs[r], sum(grads((4, 2)))),
            "all_gather": (whole, grads((8, 2))[r].chunk(WORLD)[r]),
            "all_gather_rs": (whole, sum(grads((8, 2))).chunk(WORLD)[r]),
            "split": (xs[r].chunk(WORLD)[r], torch.cat(grads((2, 2)))),
            "reduce_scatter": (sum(xs).chunk(WORLD)[r], torch.cat(grads((2, 2)))),
        }
        assert set(result) == set(expected)
        for kind, (out, grad) in expected.items():
            assert torch.equal(result[kind][0], out), f"rank {r} {kind} forward"
            assert torch.equal(result[kind][1], grad), f"rank {r} {kind} backward"
