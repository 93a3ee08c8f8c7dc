"""Benchmarks of syncswitch: `python bench/run.py --quick --out bench-runs/quick.json` runs them all."""
