"""A Kubernetes API-server emulator for tests, demos, benchmarks and chaos runs (no real one exists here).

Serves core/v1 pods, nodes, namespaces, resourcequotas and events, events.k8s.io/v1 events and
coordination.k8s.io/v1 leases over HTTP(S) with the behaviours the real ``kubernetes`` client and ``kubectl``
depend on; see docs/emulator.md for what it does and deliberately does not do.

`python -m sim.emulator` serves it as a process; `testing` starts it for a test (in this process or as a
child) and steers it through one handle (faults, the fault-free `/_sim/` hooks).

Imports: sim.kit only (`testing`, for its child process); nothing of the cluster, the actors or scenarios.
"""

from sim.emulator.emulator import Emulator, EmulatorConfig
from sim.emulator.faults import FaultRule

__all__ = ["Emulator", "EmulatorConfig", "FaultRule"]
