"""The graph compiler: trace a model into a multi-strategy logical graph, compile per (strategy, rank)."""
