"""Figures of simulated steps: a step's per-rank timeline and the grids' speedups."""
