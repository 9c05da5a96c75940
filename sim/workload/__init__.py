"""The pods a run submits and the verdict on them, read from the API alone.

- `mix`: the demo's seeded pod mix (kinds, proportions, namespaces, labels);
- `report`: the demo's verdict — per-device usage rebuilt from the pods' allocation annotations;
- `devicerules`: each vendor's sharing rules, judged from the API (what the sums alone miss);
- `inspection`: the per-device allocation sums `hami-scheduler inspect` must agree with.

Imports: sim.nodes (node and vendor constants) and sim.kit; never the cluster, chaos, fuzz or scenarios.
"""
