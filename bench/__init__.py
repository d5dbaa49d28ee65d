"""Benchmarks. ``python -m bench`` runs the edge benchmarks (bench/edge/): Horologe and a
Redis sorted-set delay queue, side by side in one run, measured through public APIs.
The ``bench_*.py`` scripts are component benchmarks that explain edge figures."""
