"""The simulated kube-scheduler that calls our extender the way the HAMi chart configures it.

- `scheduler`: the queue, the scheduling cycle and the extender calls (filter, bind, preemption of none);
- `state`: its settings, each pod's queue state and attempts, its statistics, the FitError text;
- `cache`: kube-scheduler's cache (node tree, requested resources, the in-tree filters before the extender);
- `extender`: kube-scheduler's HTTP extender client (`pkg/scheduler/extender.go`);
- `service`: the extender's Kubernetes Service as kube-scheduler reaches it with several replicas.

Imports: sim.kit only.
"""
