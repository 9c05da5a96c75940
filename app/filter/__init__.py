"""The Filter verb (kube-scheduler's `filterVerb`): decide -> assume -> write the allocation -> answer.

- usecase.py: the use case (decide on the fast path, assume in the ledger, write or defer the write);
- intake.py: what is read before deciding (readiness, the pod's requests, the pod as the API has it);
- rowguard.py: which of the pod's own ledger rows a filter may replace or forget (never a bound one);
- nodespath.py: the Nodes path (whole Node objects in the args: decide on them alone, write nothing);
- dra.py: the entry /filter calls, DRA side by side (refuse what kube-scheduler's DRA allocator serves);
- write.py: the deferred allocation write that follows the answer off the serial path;
- outcome.py: the answer, shared by the above.

Imports: app.context, app.k8s, app.state, app.devices, app.core — never another verb's package.
"""
