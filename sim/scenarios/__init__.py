"""The playground scenarios: `python -m sim demo` (a whole cluster, a seeded workload, a verdict) and
`python -m sim up` (the whole stack in the foreground, for kubectl and other suites).

Imports: anything below (sim.cluster, sim.workload, ...); nothing imports it except `sim.__main__`, by name.
"""
