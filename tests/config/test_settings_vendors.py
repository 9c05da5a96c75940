"""The vendor switches and the device config in the settings (HAMI_ENABLE_ASCEND / HAMI_ENABLE_ILUVATAR,
HAMi's --enable-ascend / --enable-iluvatar; reference vendors §1.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.envvars import SettingsError
from config.settings import load_settings


def test_ascend_switch_brings_the_chart_chips(tmp_path: Path) -> None:
    settings = load_settings({"HAMI_ENABLE_ASCEND": "true"})
    keys = [v.key for v in settings.vendors]  # Enflame DRS is always on (HAMi's built-in names, V§2.9)
    assert keys[:2] == ["NVIDIA", "Enflame"] and keys[2] == "Ascend910A"
    assert len(keys) == 9
    assert "huawei.com/Ascend910B3" not in settings.disabled_resources


def test_without_the_switch_ascend_pods_are_answered(tmp_path: Path) -> None:
    config = tmp_path / "device-config.yaml"
    config.write_text("vnpus:\n  configs:\n    - commonWord: Ascend910B3\n", encoding="utf-8")
    settings = load_settings({"HAMI_DEVICE_CONFIG_FILE": str(config)})
    assert [v.key for v in settings.vendors] == ["NVIDIA", "Enflame"]  # the section alone does not enable it
    assert settings.disabled_resources["huawei.com/Ascend910B3"] == (
        "Huawei Ascend is not enabled (device config: HAMI_ENABLE_ASCEND)"
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HAMI_ENABLE_ASCEND": "maybe"}, "HAMI_ENABLE_ASCEND='maybe': expected true or false"),
        ({"HAMI_ENABLE_ILUVATAR": "yes please"}, "HAMI_ENABLE_ILUVATAR='yes please': expected true or false"),
    ],
)
def test_invalid_switches(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as failure:
        load_settings(env)
    assert message in str(failure.value)


def test_iluvatar_switch_brings_the_chart_chips() -> None:
    """HAMI_ENABLE_ILUVATAR without an `iluvatars` section: the chart's four chips (V§1.3)."""
    settings = load_settings({"HAMI_ENABLE_ILUVATAR": "true"})
    assert [v.key for v in settings.vendors][-4:] == ["MR-V100", "MR-V50", "BI-V150", "BI-V100"]
    assert "iluvatar.ai/BI-V150-vgpu" not in settings.disabled_resources
