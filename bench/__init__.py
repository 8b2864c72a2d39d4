"""Benchmarks; each module has a main(): `.venv/bin/python -m bench.<module>`."""
