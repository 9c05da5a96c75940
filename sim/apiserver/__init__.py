"""A Kubernetes API-server emulator for tests, demos, benchmarks and chaos runs (no real one exists here).

Serves core/v1 pods, nodes, namespaces, resourcequotas and events, events.k8s.io/v1 events and
coordination.k8s.io/v1 leases over HTTP(S) with the behaviours the real ``kubernetes`` client and ``kubectl``
depend on; see docs/emulator.md for what it does and deliberately does not do.
"""

from sim.apiserver.emulator import Emulator, EmulatorConfig
from sim.apiserver.faults import FaultRule

__all__ = ["Emulator", "EmulatorConfig", "FaultRule"]
