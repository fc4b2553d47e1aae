"""How many tokens the chunked cross-entropy (``models.chunked_loss``) takes at a time: named
without torch, so that the memory model (and the command line's checks) read it torch-free.

A GPU takes large chunks, so that a long micro-batch's loss is a few dozen kernel launches; a
CPU small ones, which stay in its caches. At 8K tokens over 32,000 entries on 2 cores the loss's
forward and backward took 0.95 s in fp32 and 0.73 s in bf16 with 4 MiB chunks, 1.06 s and 1.35 s
with 256 MiB ones, and 1.68 s and 1.82 s through ``F.cross_entropy`` over the whole fp32 logits.
"""

CHUNK_BYTES = 1 << 28  # one chunk's fp32 softmax on a GPU: 256 MiB; the memory model counts this one
CPU_CHUNK_BYTES = 1 << 22  # 4 MiB: within a CPU's caches


def chunk_bytes(device_type: str) -> int:
    """A chunk's fp32 bytes on a device of ``device_type`` ("cuda", "cpu"...)."""
    return CPU_CHUNK_BYTES if device_type == "cpu" else CHUNK_BYTES


def chunk_rows(entries: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Tokens per chunk when each token's logits hold ``entries`` vocabulary entries."""
    return max(1, chunk_bytes // (4 * entries))
