"""HAMI_ADOPT_SCHEDULER_NAMES: HAMi's default name unless set; set and empty adopts nothing."""

from __future__ import annotations

import pytest

from config.envvars import SettingsError
from config.settings import load_settings


@pytest.mark.parametrize(
    ("env", "adopted", "names"),
    [
        ({}, ("hami-scheduler",), {"hami-scheduler"}),
        ({"HAMI_SCHEDULER_NAME": "hami-py"}, ("hami-scheduler",), {"hami-py", "hami-scheduler"}),
        ({"HAMI_SCHEDULER_NAME": "hami-py", "HAMI_ADOPT_SCHEDULER_NAMES": ""}, (), {"hami-py"}),
        ({"HAMI_ADOPT_SCHEDULER_NAMES": "vgpu, hami-scheduler"}, ("vgpu", "hami-scheduler"), None),
    ],
    ids=["default", "renamed", "none", "list"],
)
def test_adopted_names(env: dict[str, str], adopted: tuple[str, ...], names: set[str] | None) -> None:
    settings = load_settings(env)
    assert settings.adopt_scheduler_names == adopted
    assert settings.counted.names == frozenset(names or {settings.scheduler_name, *adopted})


def test_default_scheduler_is_refused() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({"HAMI_ADOPT_SCHEDULER_NAMES": "hami-scheduler,default-scheduler"})
    assert str(caught.value).startswith(
        "HAMI_ADOPT_SCHEDULER_NAMES='hami-scheduler,default-scheduler': 'default-scheduler' cannot be adopted"
    )
