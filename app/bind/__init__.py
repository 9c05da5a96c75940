"""The Bind verb (kube-scheduler's `bindVerb`): node lock -> re-check -> bind-phase `allocating` -> Binding.

- usecase.py: the use case;
- undo.py: its compensation (a failure releases our lock and forgets the row; an unknown outcome marks it);
- wait.py: its bounded waits (this replica's allocation write; the node locks);
- outcome.py: the answer and how its steps fail.

Imports: app.context, app.k8s, app.state, app.devices, app.core — never another verb's package.
"""
