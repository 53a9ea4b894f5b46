"""Service configuration: one YAML file, overridden by ``WEPUSH_*`` environment variables, then flags."""

from __future__ import annotations

from wepush.server.config._loader import ConfigError, load_config
from wepush.server.config._model import (
    AgentSettings,
    ArtifactSettings,
    DatabaseSettings,
    EventSettings,
    ImportSettings,
    LoggingSettings,
    MetricsSettings,
    PluginSettings,
    S3Settings,
    SecretSettings,
    SecuritySettings,
    ServerSettings,
    ServiceConfig,
)
from wepush.server.config._render import render_effective_config

__all__ = [
    "AgentSettings",
    "ArtifactSettings",
    "ConfigError",
    "DatabaseSettings",
    "EventSettings",
    "ImportSettings",
    "LoggingSettings",
    "MetricsSettings",
    "PluginSettings",
    "S3Settings",
    "SecretSettings",
    "SecuritySettings",
    "ServerSettings",
    "ServiceConfig",
    "load_config",
    "render_effective_config",
]
