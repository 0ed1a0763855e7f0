"""Attention backends: the registry of baselines and CUDA versions, and how each runs."""
