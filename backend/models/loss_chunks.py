"""How many tokens the chunked cross-entropy (``models.chunked_loss``) takes at a time: named
without torch, so that the memory model (and the command line's checks) read it torch-free."""

CHUNK_BYTES = 1 << 28  # one chunk's fp32 softmax: 256 MiB


def chunk_rows(entries: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Tokens per chunk when each token's logits hold ``entries`` vocabulary entries."""
    return max(1, chunk_bytes // (4 * entries))
