"""The Filter verb (kube-scheduler's `filterVerb`): decide -> assume -> write the allocation -> answer.

- usecase.py: the use case (decide on the fast path, assume in the ledger, write or defer the write);
- nodespath.py: the Nodes path (whole Node objects in the args: decide on them alone, write nothing);
- dra.py: the entry /filter calls, DRA side by side (refuse what kube-scheduler's DRA allocator serves);
- write.py: the deferred allocation write that follows the answer off the serial path;
- outcome.py: the answer, shared by the above.

Imports: app.context, app.k8s, app.state, app.devices, app.core — never another verb's package.
"""
