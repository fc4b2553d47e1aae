"""The parallel layers: how each dimension of a strategy computes its share, above the
communication between ranks (``runtime``): tensor-parallel linears with sequence parallelism
(``sequence_parallel_linear``), the vocabulary-parallel loss (``vocab_parallel``), context
parallelism (ring attention over zig-zag chunks, ``ring_attention`` with its blocks in
``attention_blocks`` and its chunks in ``zigzag``; DeepSpeed-Ulysses, ``ulysses``) and the
pipeline schedules (``pipeline``). Modules here import ``runtime`` and ``models``, never the
switch planner, the graph compiler or training."""
