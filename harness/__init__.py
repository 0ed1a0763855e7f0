"""Backend registry, builds, correctness checks, benchmarks, results and plots."""
