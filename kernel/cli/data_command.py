"""``hotswitch data``: how long your documents are, in the tokens a run would train on, and what
a ``max_len`` does to them, before you choose it (nothing is trained)."""

from __future__ import annotations

import json

from hotswitch.kernel.cli.progress import write


def add_parser(sub) -> None:
    p = sub.add_parser(
        "data",
        help="how long your documents are in tokens, and what a max_len cuts (nothing is trained)",
        description="Reads the documents as hotswitch train --data reads them, a seeded sample of them.",
    )
    p.add_argument("data", nargs="+", help="text/JSONL/Parquet/Arrow files, folders or patterns (gzip too)")
    p.add_argument("--text-field", default="text", help="the field or column holding the text (default text)")
    p.add_argument("--prompt-field", default=None, help="the field holding each record's prompt (fine-tuning)")
    p.add_argument("--chat-field", default=None, help="the field holding each record's conversation (fine-tuning)")
    p.add_argument("--tokenizer", default="byte", help="byte (default), bpe:N or hf:DIR, as training would")
    p.add_argument("--max-len", type=int, nargs="+", default=[256, 1024, 4096, 16384], help="max_len values to weigh")
    p.add_argument("--sample", type=int, default=2000, help="documents to read, drawn at random (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def _progress(done: int, total: int, width: int = 30) -> None:
    if done == total or done % 50 == 0:
        filled = width * done // total
        write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} documents tokenised")
        if done == total:
            write("\n")


def run(args) -> int:
    from hotswitch.backend.data.length_profile import length_profile
    from hotswitch.backend.models.config import get_config
    from hotswitch.backend.train.run.recipe import read_documents

    if args.sample < 1:
        raise ValueError(f"--sample {args.sample} reads nothing; give at least 1 document")
    if min(args.max_len) < 2:
        raise ValueError(f"--max-len {min(args.max_len)} holds no token to predict; give at least 2, as training takes")
    if args.seed < 0:
        raise ValueError(f"--seed {args.seed}: give a whole number of at least 0")
    unbounded = get_config("tiny").with_(vocab_size=1 << 31)  # no model here for the vocabulary to fit
    source = read_documents(args.data, args.text_field, args.tokenizer, unbounded, args.prompt_field, args.chat_field)
    profile = length_profile(source, args.max_len, args.sample, args.seed, None if args.json else _progress)
    out = {"data": source.describe(), "tokenizer": source.tokenizer.name, **profile}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        _print_table(out)
    return 0


def _print_table(out: dict) -> None:
    print(f"{out['data']}, {out['tokenizer']} tokens")
    print(f"sampled {out['sampled']:,} documents (seed {out['seed']}): {out['targets']:,} tokens to train on")
    quantiles = "  ".join(f"{name} {value:,}" for name, value in out["quantiles"].items())
    print(f"length in tokens  {quantiles}  longest {out['longest']:,}")
    print(f"{'max_len':>8}  {'longer':>7}  {'cut trains':>10}  {'split: sequences/document':>25}")
    for row in out["max_len"]:
        print(
            f"{row['max_len']:>8}  {row['longer']:>7.1%}  {row['cut_trains']:>10.1%}  {row['split_sequences']:>25.2f}"
        )
    print("cut (default) trains each document's first max_len tokens; --long-documents split trains all of them")
