"""Reproducible experiments, each runnable as `python -m worker.experiments.<name>`."""
