"""Typed settings shared by the Gunicorn service and the registration worker."""

from config.settings import Settings, SettingsError, load_settings

__all__ = ["Settings", "SettingsError", "load_settings"]
