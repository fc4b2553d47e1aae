"""Memory per device against Megatron's, measured on 4 CPU ranks (gloo).

- ``activation_bytes_per_token_layer``: per strategy, the bytes autograd keeps for backward per
  token and transformer layer, in bf16, counted with ``saved_tensors_hooks`` (the same count
  the memory model is checked against) on a model of ``--layers`` and of twice as many layers,
  so the head cancels; beside Megatron's 34 x dim / tp (sequence parallelism and flash
  attention, Korthikanti et al. 2022, with the attention-score term gone) and the ratio.
  Strategies without sequence parallelism are shown for reference: Megatron's figure assumes it.
- ``optimizer_bytes_per_device``: per instantiation strategy, the bytes this rank's master
  weights and AdamW moments take after one update (bf16 compute, fp32 masters), beside
  12 x params / (tp x pp) (unsharded) and 12 x params / (tp x pp x dp) (sharded over dp).
- ``model``: the analytic model's figure for each measured strategy (``planning.memory``).

    python benchmarks/memory.py --json
"""

from __future__ import annotations

import argparse
import json

from hotswitch.backend.models.config import get_config
from hotswitch.backend.precision import Precision
from hotswitch.backend.runtime.spawn import spawn_ranks
from hotswitch.backend.strategy import Strategy
from hotswitch.backend.train.loop.engine import Engine
from hotswitch.backend.train.planning.memory import kept_activation_bytes
from hotswitch.backend.train.planning.memory_measure import measured_activation_bytes
from hotswitch.backend.train.state.optim import OptimizerConfig

ACTIVATION_STRATEGIES = ["dp2tp2sp", "tp4sp", "dp2tp2", "tp4", "dp4"]
OPTIMIZER_STRATEGIES = ["dp4", "dp2tp2", "tp4"]
BF16 = Precision.of("bf16")


def _config(args, layers: int):
    return get_config("tiny").with_(dim=args.dim, ffn_dim=args.ffn, n_layers=layers, max_seq_len=args.length)


def _engine(config, strategy: Strategy) -> Engine:
    return Engine(config, [strategy], strategy, OptimizerConfig(), token_budget=config.max_seq_len, precision=BF16)


def activations(args) -> dict:
    out = {}
    for name in ACTIVATION_STRATEGIES:
        s = Strategy.parse(name)
        counts = []
        for layers in (args.layers, 2 * args.layers):
            config = _config(args, layers)
            counts.append(measured_activation_bytes(_engine(config, s), s, args.length))
        per_token_layer = (counts[1] - counts[0]) / args.layers / args.length
        megatron = 34 * args.dim / s.tp
        config = _config(args, args.layers)
        model = kept_activation_bytes(config, s, args.length, BF16)
        out[name] = {
            "measured": per_token_layer,
            "megatron_formula": megatron,
            "ratio": per_token_layer / megatron,
            "model_vs_measured_total": model / counts[0],
        }
    return out


def optimizer_bytes(args) -> dict:
    out = {}
    for name in OPTIMIZER_STRATEGIES:
        s = Strategy.parse(name)
        config = _config(args, args.layers)
        engine = _engine(config, s)
        engine.master.clip_and_update()  # AdamW's moments exist after its first step
        held = engine.master.optimizer_bytes()
        out[name] = {
            "measured": held,
            "unsharded": 12 * config.n_params / (s.tp * s.pp),
            "sharded_goal": 12 * config.n_params / (s.tp * s.pp * s.dp),
            "sharded": engine.master.sharded,
        }
    return out


def bench_rank(rank: int, world: int, args) -> dict:
    return {
        "activation_bytes_per_token_layer": activations(args),
        "optimizer_bytes_per_device": optimizer_bytes(args),
        "dim": args.dim,
        "precision": "bf16",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--ffn", type=int, default=688, help="the FFN's width (LLaMA: about 8/3 dim)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--length", type=int, default=512)
    args = parser.parse_args()
    out = spawn_ranks(bench_rank, 4, args, timeout=3600)[0]
    if not args.json:
        for name, row in out["activation_bytes_per_token_layer"].items():
            print(f"{name}: {row['measured']:.0f} B per token and layer, {row['ratio']:.2f}x Megatron's")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
