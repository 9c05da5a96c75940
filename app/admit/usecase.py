"""The Webhook use case: the pure admission decision plus quota usage from the shared ledger (§6).

Stateless apart from reading the ledger view, so every replica may answer admission, leader or not; that
keeps pod creation working during a failover (HAMi #1954).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.context import Context
from app.core import admissionroute, dra, quota
from app.core.admission import AdmissionSettings, admit
from app.core.adoption import scheduler_of
from app.core.bindingrule import review_binding
from app.core.review import AdmissionInput, AdmissionOutcome, errored

NO_QUOTA = quota.build_view({}, {})


def settings_for(context: Context) -> AdmissionSettings:
    s = context.settings
    trusted = s.webhook_trusted_users or AdmissionSettings().trusted_users
    return AdmissionSettings(
        s.scheduler_name, s.force_overwrite_default_scheduler, trusted, s.disabled_resources
    )


def review(context: Context, request: AdmissionInput) -> AdmissionOutcome:
    unrecognised = admissionroute.unrecognised(request)
    if unrecognised:  # e.g. a request for `bindings` whose kind is not Binding: never decided as a pod
        return errored(400, unrecognised)
    if admissionroute.is_binding(request):  # either endpoint: only the annotation rule, no pod, no quota
        return review_binding(request, settings_for(context), context.settings.vendors)
    if request.operation == "UPDATE":  # only the annotation rule: no quota, no ledger read
        return admit(request, settings_for(context), context.settings.vendors, NO_QUOTA)
    snapshot = context.refresh()
    namespace = request.namespace or _namespace(request.pod)
    limits = snapshot.quota_limits.get(namespace, {}) if snapshot else {}
    view = quota.build_view({namespace: limits}, {namespace: context.usage.quota_used(namespace)})
    outcome = admit(request, settings_for(context), context.settings.vendors, view)
    return _warn_dra(context, outcome)


def _warn_dra(context: Context, outcome: AdmissionOutcome) -> AdmissionOutcome:
    """Admitted for our scheduler while a DeviceClass serves a name it asks for: say so (app/filter/dra.py
    will refuse it); the pod is admitted all the same, as HAMi would."""
    pod = outcome.pod
    if not outcome.allowed or pod is None or scheduler_of(pod) != context.settings.scheduler_name:
        return outcome
    warning = dra.pod_warning(context.dra(), pod)
    return dataclasses.replace(outcome, warnings=(*outcome.warnings, warning)) if warning else outcome


def _namespace(pod: Any) -> str:
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    value = metadata.get("namespace") if isinstance(metadata, dict) else None
    return value if isinstance(value, str) and value else "default"
