"""Typed settings shared by the Gunicorn service and the registration worker."""

from config.envvars import SettingsError
from config.settings import Settings, load_settings

__all__ = ["Settings", "SettingsError", "load_settings"]
