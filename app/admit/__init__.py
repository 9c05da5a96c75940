"""The Admit verb: the mutating admission webhook (pods, pods/binding, bindings) with quota from the ledger.

- usecase.py: the pure admission decision plus the ledger's quota usage.

Imports: app.context, app.k8s, app.state, app.devices, app.core — never another verb's package.
"""
