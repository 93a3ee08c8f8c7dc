"""Benchmarks of syncswitch: `python -m bench PART [options]` runs one part; `python -m bench --help` lists them."""
