"""A run's cluster as processes, on either control plane: start it, keep it, stop it.

- `start`: `start_cluster`, the whole cluster in order (the demo, `sim up`, the fuzzer and the harness call);
- `stack`: the `Stack` of child processes (control plane, nodes, worker, service), stopped by PID;
- `harness`: `running_cluster` and `create_pod` (through admission), whichever control plane runs;
- `realcluster`: the stack on the real control plane, configured from the Helm chart;
- `replicas`, `replicapods`, `serviceproxy`, `disruption`: several extender replicas, as the chart's
  Deployment's pods, behind a loopback Service, with the PodDisruptionBudget status the eviction API reads;
- `actors`: `python -m sim nodes` and `python -m sim scheduler`, the simulated nodes and kube-scheduler;
- `image`: our containers from the built image (`--from-image`); `pki`: throwaway certificates;
- `skewclock`: `python -m sim.cluster.skewclock`, a process whose wall clock a test can step.

Imports: sim.controlplane, sim.kubescheduler, sim.nodes, sim.workload, sim.emulator, sim.kit; never chaos,
fuzz or the scenarios.
"""
