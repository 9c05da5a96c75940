"""The harness that proves the product, one package per role (docs/harness.md), top to bottom:
scenarios, fuzz, chaos (what runs) -> cluster (the cluster as processes) -> workload (the pods and the
verdict) -> controlplane, kubescheduler, nodes (the actors) -> emulator (the API server) -> kit (helpers).
A package imports only those below it (pyproject.toml's import contracts)."""
