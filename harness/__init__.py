"""The study's machinery: builds, compile check, correctness gate, benchmarks, results
files, plots and the README report (`python -m harness`)."""
