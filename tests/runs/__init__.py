"""Tests that run the product for real: sweeps through the launchers, the frameworks' ranks, the storage servers, the
engines (SLURM, Ray, podman, network-namespace hosts). Each is marked ``runs`` by its folder (tests/conftest.py)."""
