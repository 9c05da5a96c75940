"""kube-controller-manager in the real control plane: which of its controllers the harness runs, and why.

The harness has no kubelets (the simulated nodes play them), no pod network and plays our replicas as
processes, so it runs only the controllers whose work a test, a user of `sim up` or the eviction API needs
and that nothing else does. Each is named by its canonical name (cmd/kube-controller-manager/names, the same
in 1.34, 1.37 and 1.38): an unknown name stops kube-controller-manager at start, so a version that lacks one
fails loudly instead of running without it.

Run:
- disruption-controller: PodDisruptionBudget status (currentHealthy, desiredHealthy, expectedPods,
  disruptionsAllowed, disruptedPods), which the eviction API (`kubectl drain`, a preemptor evicting under
  budgets) only reads. Bare pods work with an integer minAvailable; a percentage or maxUnavailable needs the
  pods' controller's scale, as in any cluster.
- namespace-controller: a deleted namespace is emptied and removed instead of staying Terminating.
- garbage-collector-controller: ownerReferences: dependents go with their owner (background and foreground
  cascading deletion), orphans are released.
- resourcequota-controller: ResourceQuota status; kube-apiserver's quota admission refuses every pod of a
  namespace whose quota has no status yet ("status unknown for quota") and gives nothing back on deletion
  without it.
- persistentvolumeclaim-protection-controller, persistentvolume-protection-controller: remove the finalizers
  kube-apiserver's StorageObjectInUseProtection admission adds, or a namespace holding a claim never goes.
- podgroup-protection-controller, with the Workload API only (its gate, GenericWorkload, is passed too): the
  finalizer the PodGroupProtection admission puts on PodGroups.

Left out, on purpose:
- node-lifecycle-controller and taint-eviction-controller: the simulated nodes post no Lease or heartbeat,
  so their nodes would turn NotReady and be tainted, and their pods evicted.
- deployment, replicaset, statefulset, daemonset, job, cronjob, replicationcontroller: they would create pods
  the simulated kubelets report Running with nothing running (a `helm install` of our chart would look as if
  it served); our replicas are processes the harness starts (sim.cluster.replicapods plays their pods).
- pod-garbage-collector-controller: force-deletes pods bound to nodes that do not exist, which tests use.
- serviceaccount and serviceaccount-token: the ServiceAccount admission plugin is off and the harness's
  processes use static tokens; TokenRequest works without them.
- endpoints, endpointslice, service-cidr, node-ipam, route: no pod network or Services with endpoints.
- resourceclaim-controller and the other DRA controllers: the DRA suite drives kube-scheduler alone.

One instance, no leader election (no Lease renewed every two seconds); each controller runs as its own
ServiceAccount with the bootstrap RBAC role kube-apiserver defines for it
(`--use-service-account-credentials`, as kubeadm runs it), kube-controller-manager itself as
`system:kube-controller-manager`.
"""

from __future__ import annotations

from pathlib import Path

NAME = "kube-controller-manager"
CONTROLLERS = (
    "disruption-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "resourcequota-controller",
    "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller",
)
WORKLOAD_CONTROLLERS = ("podgroup-protection-controller",)


def controllers(workload_api: bool) -> tuple[str, ...]:
    """The controllers to run; with the Workload API also the one for its PodGroups' finalizer."""
    return CONTROLLERS + (WORKLOAD_CONTROLLERS if workload_api else ())


def argv(
    binary: Path,
    kubeconfig: Path,
    port: int,
    *,
    workload_api: bool,
    feature_gates: tuple[str, ...] = (),
    verbosity: int = 1,
) -> list[str]:
    """kube-controller-manager's command line: `kubeconfig` is its own user's, `port` its secure port
    (/healthz is always allowed)."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--controllers={','.join(controllers(workload_api))}",
        "--authentication-skip-lookup=true",  # no requestheader CA to read: no client-cert auth here
        "--leader-elect=false",
        "--use-service-account-credentials=true",
        f"--v={verbosity}",
        *feature_gates,
    ]
