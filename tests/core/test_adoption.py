"""Which pods' allocations count: ours, the adopted names, never the others (app/core/adoption.py)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.adoption import ADOPTED, FOREIGN, OURS, Counted, describe, name_problem, parse_names, refusal


def pod(scheduler: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(
    ("counted", "scheduler", "role"),
    [
        (Counted("hami-scheduler-py", ("hami-scheduler",)), "hami-scheduler-py", OURS),
        (Counted("hami-scheduler-py", ("hami-scheduler",)), "hami-scheduler", ADOPTED),
        (Counted("hami-scheduler-py", ("hami-scheduler",)), "default-scheduler", FOREIGN),
        (Counted("hami-scheduler-py", ("hami-scheduler",)), None, FOREIGN),
        (Counted("hami-scheduler-py", ("hami-scheduler",)), 7, FOREIGN),
        (Counted("hami-scheduler", ("hami-scheduler",)), "hami-scheduler", OURS),
        (Counted("hami-scheduler", ()), "hami-scheduler-old", FOREIGN),
        (Counted("hami-scheduler", ("a", "b")), "b", ADOPTED),
    ],
    ids=["ours", "adopted", "default", "no-name", "not-a-string", "ours-wins", "none-adopted", "second"],
)
def test_role(counted: Counted, scheduler: Any, role: str) -> None:
    assert counted.role(pod(scheduler)) == role


def test_names_and_order() -> None:
    counted = Counted("ours", ("hami-scheduler", "ours", "old"))
    assert counted.names == frozenset({"ours", "hami-scheduler", "old"})
    assert counted.ordered() == ("ours", "hami-scheduler", "old")
    assert Counted().ordered() == ("hami-scheduler",)


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        ("", ()),
        (" , ", ()),
        ("hami-scheduler", ("hami-scheduler",)),
        ("a, b.example,a", ("a", "b.example")),
    ],
    ids=["empty", "blanks", "one", "trimmed-deduplicated"],
)
def test_parse_names(raw: str, names: tuple[str, ...]) -> None:
    assert parse_names(raw) == names


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("default-scheduler", "'default-scheduler' cannot be adopted"),
        ("Hami", "'Hami' is not a valid scheduler name"),
        ("a=b", "'a=b' is not a valid scheduler name"),
        ("ok,-bad", "'-bad' is not a valid scheduler name"),
        ("x" * 254, "is not a valid scheduler name"),
    ],
    ids=["default-scheduler", "upper-case", "selector-syntax", "leading-dash", "too-long"],
)
def test_parse_names_refuses(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_names(raw)
    assert message.split("'")[-1].strip() in name_problem(raw.split(",")[-1])


def test_describe() -> None:
    counted = Counted("hami-scheduler-py", ("hami-scheduler", "old"))
    assert describe(counted, [OURS, ADOPTED, ADOPTED]) == (
        "3 pods hold devices: 1 ours (hami-scheduler-py), 2 adopted (hami-scheduler, old)"
    )
    assert describe(Counted("a", ("a",)), [OURS]) == "1 pods hold devices: 1 ours (a), 0 adopted (none)"


@pytest.mark.parametrize(
    ("scheduler", "refused"),
    [("hami-py", False), ("hami-scheduler", True), ("other", False), (None, False)],
    ids=["ours", "adopted", "foreign", "no-name"],
)
def test_refusal_only_for_adopted_pods(scheduler: Any, refused: bool) -> None:
    the_pod = pod(scheduler)
    the_pod["metadata"]["namespace"] = "team"
    message = refusal(Counted("hami-py", ("hami-scheduler",)), the_pod)
    assert bool(message) is refused
    if refused:
        assert message == (
            "pod team/p belongs to the adopted scheduler 'hami-scheduler': its allocation is counted, never "
            "changed; only pods of 'hami-py' are scheduled here"
        )
