"""Ring attention's compute on one rank against one device's whole attention, measured in one
run: how much splitting a sequence into zig-zag blocks costs before any transfer.

For each length and cp degree, one rank's share of ring attention (its own two chunks
causally, then ``cp - 1`` blocks of half its queries or half the keys, merged by log-sum-exp;
backward block by block from the merged rows: ``parallel.attention_blocks``) is timed for the
first and the last rank of the ring, against the same kernels run once on the whole sequence.
``efficiency`` is the whole attention's seconds over ``cp`` divided by the slower rank's: 1.0
means the split costs nothing; the simulator's ring model (``sim.context_parallel``) assumes 1.0.
The output: the ``device``, ``dtype`` and head shape, and ``rows``, one per length: ``whole_s``,
the ``kernel`` used, and per cp degree (``cp``) the first and last rank's ``rank_s`` and the
``efficiency``. ``--smoke``: 2 heads of 8 channels, 64 tokens, cp 2, one repeat (the output's
``smoke``).

    python -m benchmarks.ring_blocks --json                                   # CPU, small
    python -m benchmarks.ring_blocks --device cuda --dtype bf16 --heads 32 --kv-heads 32 \\
        --head-dim 128 --lengths 16384 32768 65536 131072 --cp 2 4 8 --json   # a GPU, 7B's heads
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

import torch

from benchmarks.common.promised import check_promised
from benchmarks.common.timing import median_seconds
from hotswitch.backend.parallel.attention_blocks import blockwise, kernel
from hotswitch.backend.parallel.ring_attention import ring_block

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
SMOKE = dict(heads=2, kv_heads=1, head_dim=8, lengths=[64], cp=[2], repeat=1)
OUTPUT_KEYS = (
    "device",
    "dtype",
    "rows[].length",
    "rows[].whole_s",
    "rows[].kernel",
    "rows[].cp.*.rank_s",
    "rows[].cp.*.efficiency",
)


def _blocks(rank: int, cp: int, chunk: int) -> list[tuple[slice, slice, bool]]:
    """(query rows, key columns, causal) of every ring step of ``rank``, as ``RingAttention``."""
    return [ring_block(step, rank, cp, chunk) for step in range(cp)]


def _tensors(args, length: int):
    shape = (1, args.kv_heads, args.heads // args.kv_heads, length, args.head_dim)
    kv_shape = (1, args.kv_heads, 1, length, args.head_dim)
    dtype = DTYPES[args.dtype]
    return [torch.randn(s, device=args.device, dtype=dtype) for s in (shape, kv_shape, kv_shape, shape)]


def measure(args, length: int) -> dict:
    q, k, v, grad = _tensors(args, length)
    whole = median_seconds(
        lambda: blockwise(q, k, v, grad, [(slice(None), slice(None), True)]), args.device, args.repeat
    )
    row = {"length": length, "whole_s": whole, "kernel": kernel(q), "cp": {}}
    for cp in args.cp:
        local = length // cp  # one rank's two chunks
        shard = [x[..., :local, :] for x in (q, k, v, grad)]  # the same shapes as a rank's chunks
        rank_s = [
            median_seconds(functools.partial(blockwise, *shard, _blocks(r, cp, local // 2)), args.device, args.repeat)
            for r in (0, cp - 1)
        ]
        row["cp"][cp] = {"rank_s": rank_s, "efficiency": whole / cp / max(rank_s)}
        print(
            f"{length} tokens, cp{cp}: whole {whole:.4f} s, ranks {rank_s[0]:.4f}/{rank_s[1]:.4f} s, "
            f"efficiency {row['cp'][cp]['efficiency']:.3f}",
            file=sys.stderr,
            flush=True,
        )
    return row


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048])
    p.add_argument("--cp", type=int, nargs="+", default=[2, 4])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help=f"a tiny run in seconds: {SMOKE}")
    args = p.parse_args(argv)
    if args.smoke:
        vars(args).update(SMOKE)
    for length in args.lengths:
        if any(length % (2 * cp) for cp in args.cp):
            p.error(f"a length of {length} tokens does not split into 2 x cp chunks for cp in {args.cp}")
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    result = {
        "device": name,
        "dtype": args.dtype,
        "heads": args.heads,
        "kv_heads": args.kv_heads,
        "head_dim": args.head_dim,
        "rows": [measure(args, n) for n in args.lengths],
        **({"smoke": SMOKE} if args.smoke else {}),
    }
    print(json.dumps(result, indent=2 if args.json else None))
    check_promised(result, OUTPUT_KEYS)
    return result


if __name__ == "__main__":
    main()
