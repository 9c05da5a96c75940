"""The Preempt verb: device-aware victims for a pod short of device capacity.

- extender.py: kube-scheduler's `preemptVerb` (ProcessPreemption, docs/preemption.md).

Imports: app.context, app.k8s, app.state, app.devices, app.core — never another verb's package.
"""
