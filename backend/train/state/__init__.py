"""Training state that outlives a step: fp32 master weights and AdamW (optim, master), and
checkpoints (written, read, kept, checked before unpickling)."""
