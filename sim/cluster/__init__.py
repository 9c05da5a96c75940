"""A run's cluster as processes, on either control plane: describe it, start it, keep it, stop it.

- `spec`: `ClusterSpec`, what cluster to start (control plane, nodes and vendors, our processes from the
  checkout or an image, chart values and replicas, schedulers, an outside extender);
- `build`: `build(spec, stack)`, the one way to start a whole cluster, in order (the demo, `sim up`, the
  fuzzer, the real-control-plane chaos storm and the harness call it);
- `stack`: the `Stack` of child processes (control plane, nodes, worker, service), stopped by PID;
- `harness`: `running_cluster(workdir, spec)` and `create_pod` (through admission), whichever control plane;
- `realcluster`: the stack on the real control plane, configured from the Helm chart;
- `replicas`, `replicapods`, `serviceproxy`, `disruption`: several extender replicas, as the chart's
  Deployment's pods, behind a loopback Service, with the PodDisruptionBudget status the eviction API reads;
- `actors`: `python -m sim nodes` and `python -m sim scheduler`, the simulated nodes and kube-scheduler;
- `image`: our containers from the built image (`--from-image`); `pki`: throwaway certificates;
- `skewclock`: `python -m sim.cluster.skewclock`, a process whose wall clock a test can step.

Starters that deliberately do not go through `build` (docs/harness.md "One way to start a cluster"): the
emulated chaos storm (its replicas are live `Replicas` it kills, restarts, stalls and steps the clocks of, on
an emulator with seeded faults), the benchmark (it times the start itself, creates its nodes in bulk and
starts a kube-scheduler per run, from `realcluster`'s steps), and the integration fixtures that start one
service process against a shared emulator (one process whose state the test writes, not a cluster). The
first two take their nodes from the builder's node step, `stack.start_nodes(stack, spec, ...)`.

Imports: sim.controlplane, sim.kubescheduler, sim.nodes, sim.workload, sim.emulator, sim.kit; never chaos,
fuzz or the scenarios.
"""
