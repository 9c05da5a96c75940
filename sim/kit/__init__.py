"""The harness's toolkit, the bottom floor: what every other sim package may use.

- `kube`: the small raw-JSON Kubernetes client the simulated actors and scenarios talk to the API with;
- `informer`: its list+watch loop with a local store and a handler per change;
- `podutil`: pod field access, resource requests, the status a kubelet reports, latency summaries;
- `processes`: child processes (own process group, log file, readiness over HTTP, stop by PID);
- `command`: what a `python -m sim <name>` subcommand is, SIGTERM handling and the periodic stats file;
- `ticker`: a background loop calling one function every few seconds until stopped.

Imports: nothing of sim (the standard library, urllib3 and app's public pieces only).
"""
