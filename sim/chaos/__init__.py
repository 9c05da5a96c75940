"""`python -m sim chaos`: the chaos storm — load, faults, crashes, leader loss — and its verdict.

- `run`: the command and the storm on the emulated control plane (`options`: its command line and summary
  keys); `real`: the storm on the real one;
- `plan`: the seeded plan (pods, deletions, kills, fault rules); `storm`: its actions on the running cluster;
- `stormfaults`: the long faults aimed at a worker; `twoleaders`: the two-leader window; `forger`: forged
  scheduler verbs;
- `observe`, `ledgerwatch`: what the storm watches while it runs;
- `check`: the verdict's rules; `verdict`: what the verdict reads at the end and which conditions it meets.

Imports: sim.cluster and everything below it; never sim.fuzz or sim.scenarios.
"""
