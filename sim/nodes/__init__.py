"""Simulated GPU nodes: the Node objects every vendor's device plugin publishes, and the Allocate side.

- `objects`: NVIDIA nodes and the cluster spec (`--nodes`, `--gpu-models`, zones), registered through the API;
- `vendors`: what each other vendor's device plugin publishes on its Node (cycled over the nodes), with
  `twobackends` (Metax, Kunlunxin, Enflame) and `part` (one vendor's share of a node);
- `kubelet`: the kubelet of every simulated node (admission, status, deletion, completion);
- `hamiplugin`: HAMi's device plugin (lock, to-allocate, Allocate), NVIDIA's and the vendors' that follow it;
- `vendorplugins`: the plugins that do not follow HAMi's protocol (Cambricon dsmlu, ...);
- `migplugin`: MIG slices realized on Allocate.

Imports: sim.emulator (the deferred-write helper) and sim.kit; never the cluster, scheduler or scenarios.
"""
