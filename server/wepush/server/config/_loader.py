"""Load the configuration: built-in defaults < YAML file < ``WEPUSH_*`` environment < command-line flags.

Unknown keys are an error wherever they come from (a typo must never be silently ignored): the file is
validated against ``contracts/jsonschema/config.schema.json`` and environment variables are mapped onto the
known key tree, so ``WEPUSH_SERVER_PROT`` fails instead of doing nothing. An error in a value names its key
and where the value was set (the file, the environment variable, the flag), never the value itself.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import math
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import ValidationError
from jsonschema.protocols import Validator
from referencing import Registry, Resource

from wepush.agent.providers.common._schema_rules import Draft202012
from wepush.server.config._durations import parse_duration
from wepush.server.config._model import ServiceConfig, build_config

#: Environment variables that are not configuration keys but are understood by the Service.
RESERVED_ENV = frozenset({"WEPUSH_DATA_DIR", "WEPUSH_CONFIG_DIR", "WEPUSH_CONFIG"})
#: The conventional name of the variable ``secrets.master-key-env`` opts in to (never read without it).
MASTER_KEY_VARIABLE = "WEPUSH_MASTER_KEY"

_DEFAULTS: dict[str, Any] = {
    "wepush": {
        "mode": "standalone",
        "data-dir": None,
        "server": {
            "bind-address": "127.0.0.1",
            "port": 18990,
            "grpc-port": 18991,
            "public-base-url": None,
            "max-body-bytes": 10 * 1024 * 1024,
            "max-upload-bytes": 1024 * 1024 * 1024,
            "cors-allowed-origins": [],
        },
        "database": {"type": "sqlite", "url": "", "pool-size": 5, "echo": False},
        "artifacts": {
            "type": "local",
            "directory": "${WEPUSH_DATA_DIR}/artifacts",
            "s3": {
                "endpoint-url": None,
                "bucket": None,
                "region": None,
                "access-key-id": None,
                "secret-access-key": None,
                "presign-ttl": "PT15M",
            },
        },
        "secrets": {
            "type": "local-envelope",
            "master-key-file": "${WEPUSH_CONFIG_DIR}/master.key",
            "master-key-env": None,
        },
        "agent": {"embedded": {"enabled": True, "max-runs": 2, "max-concurrency": 200, "name": None}},
        "security": {
            "remote-access": False,
            "bootstrap-token-file": "${WEPUSH_DATA_DIR}/bootstrap-admin.token",
            "loopback-targets-for-tests": False,
            "rate-limit": {"requests-per-second": 100, "burst": 500},
        },
        "events": {"progress-interval": "PT1S", "batch-size": 100, "sse-heartbeat": "PT15S"},
        "logging": {"level": "INFO", "format": "json"},
        "metrics": {"enabled": True},
        "plugins": {"directory": "${WEPUSH_DATA_DIR}/plugins", "trusted-keys": [], "developer-mode": False},
        "imports": {
            "max-bytes": 512 * 1024 * 1024,
            "max-rows": 5_000_000,
            "max-columns": 200,
            "max-field-length": 4096,
        },
    }
}

_LIST_KEYS = frozenset({"cors-allowed-origins", "trusted-keys"})
_CONFIG_SCHEMA_ID = "https://wepush.dev/schemas/config.schema.json"


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the key and the source."""


class _Origins:
    """Where each key's value was set — the file, an environment variable, a flag — so that an error in
    a value names the place to fix it as well as the key (``WEPUSH_SERVER_PORT``, not only
    ``wepush.server.port``). Keys left at their defaults have none."""

    def __init__(self) -> None:
        self._sources: dict[tuple[str, ...], str] = {}

    def set(self, path: Sequence[str], source: str) -> None:
        key = tuple(path)
        # A later source replaces the value, so what an earlier one set under the key no longer counts.
        for known in [known for known in self._sources if known[: len(key)] == key]:
            del self._sources[known]
        self._sources[key] = source

    def set_tree(self, node: Any, source: str, path: tuple[str, ...] = ()) -> None:
        if isinstance(node, Mapping) and node:
            for key, value in node.items():
                self.set_tree(value, source, (*path, str(key)))
        elif path:
            self.set(path, source)

    def of(self, path: Sequence[object]) -> str | None:
        """The source of the value at ``path`` (below ``wepush``), or of the list or section holding it."""
        key = tuple(str(part) for part in path)
        for end in range(len(key), 0, -1):
            if key[:end] in self._sources:
                return self._sources[key[:end]]
        return None

    def error(self, path: Sequence[str], rule: str) -> ConfigError:
        where = "wepush." + ".".join(path)
        source = self.of(path)
        return ConfigError(f"{source}: {where}: {rule}" if source else f"{where}: {rule}")


def default_document() -> dict[str, Any]:
    return copy.deepcopy(_DEFAULTS)


def _schema_registry() -> Registry[Any]:
    """All contract schemas by their ``$id``, so cross-file references resolve offline."""
    registry: Registry[Any] = Registry()
    directory = resources.files("wepush.generated.resources").joinpath("jsonschema")
    for entry in directory.iterdir():
        if entry.name.endswith(".schema.json"):
            resource = Resource.from_contents(json.loads(entry.read_text(encoding="utf-8")))
            registry = registry.with_resource(resource.id() or entry.name, resource)
    return registry


def _config_validator() -> Validator:
    registry = _schema_registry()
    schema = registry.contents(_CONFIG_SCHEMA_ID)
    return Draft202012(schema, registry=registry)


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


_BOUNDS = {
    "minimum": "at least",
    "maximum": "at most",
    "exclusiveMinimum": "greater than",
    "exclusiveMaximum": "less than",
}


def _json_type(value: object) -> str:
    for python, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, python):
            return name
    if isinstance(value, list):
        return "array"
    return "null" if value is None else "object"


def _names(keys: Any) -> str:
    return ", ".join(repr(str(key)) for key in keys)


def _rule(error: ValidationError) -> str:
    """What the schema asks of the value, said from the schema alone.

    jsonschema's own message quotes the offending value, and the value may be a secret (an S3 secret
    access key, a database URL with its password): configuration errors reach the terminal and the log,
    so they name the key and the rule, never the value. Key names are not values, so unknown or missing
    keys are named.
    """
    kind, instance = error.validator, error.instance
    expected: Any = error.validator_value
    if kind == "type":
        wanted = " or ".join([expected] if isinstance(expected, str) else expected)
        # The kind of value given is a useful hint and says nothing about the value itself.
        return f"must be of type {wanted}, not {_json_type(instance)}"
    if kind == "enum":
        return "must be one of " + ", ".join(json.dumps(option) for option in expected)
    if kind in _BOUNDS:
        return f"must be {_BOUNDS[str(kind)]} {expected}"
    if kind == "minLength":
        return f"must be at least {expected} characters long"
    if kind == "maxLength":
        return f"must be at most {expected} characters long"
    if kind == "pattern":
        return "does not match the required pattern"
    if kind == "format":
        return f"must be a valid {expected}"
    if kind == "uniqueItems":
        return "must not list an item twice"
    if kind == "additionalProperties" and isinstance(instance, Mapping):
        known = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        return f"unknown key(s) {_names(sorted(key for key in instance if key not in known))}"
    if kind == "required" and isinstance(instance, Mapping):
        return f"missing required key(s) {_names(key for key in expected if key not in instance)}"
    return f"does not satisfy the schema rule {kind!r}"


def _validate(document: Any, source: str, origins: _Origins | None = None) -> None:
    validator = _config_validator()
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        path = list(first.absolute_path)
        where = ".".join(str(part) for part in path) or "(root)"
        if origins is not None and path[:1] == ["wepush"]:
            source = origins.of(path[1:]) or source
        raise ConfigError(f"{source}: {where}: {_rule(first)}")


def _env_path(name: str, tree: dict[str, Any]) -> list[str]:
    """Map WEPUSH_AGENT_EMBEDDED_MAX_RUNS onto ['agent', 'embedded', 'max-runs'] using the known keys."""
    tokens = name.removeprefix("WEPUSH_").lower().split("_")
    node: Any = tree["wepush"]
    path: list[str] = []
    index = 0
    while index < len(tokens):
        if not isinstance(node, dict):
            raise ConfigError(f"environment variable {name} does not name a configuration key")
        for end in range(len(tokens), index, -1):
            key = "-".join(tokens[index:end])
            if key in node:
                path.append(key)
                node = node[key]
                index = end
                break
        else:
            raise ConfigError(f"environment variable {name} does not name a configuration key")
    if isinstance(node, dict):
        raise ConfigError(f"environment variable {name} names a section, not a key")
    return path


def _schema_types(path: list[str]) -> frozenset[str]:
    """The JSON types the config schema allows at ``wepush.<path>`` (following ``$ref``s)."""
    registry = _schema_registry()
    resolver = registry.resolver(base_uri=_CONFIG_SCHEMA_ID)
    node: Any = registry.contents(_CONFIG_SCHEMA_ID)
    for key in ["wepush", *path]:
        while "$ref" in node:
            resolved = resolver.lookup(node["$ref"])
            node, resolver = resolved.contents, resolved.resolver
        node = node.get("properties", {}).get(key, {})
    while "$ref" in node:
        resolved = resolver.lookup(node["$ref"])
        node, resolver = resolved.contents, resolved.resolver
    declared = node.get("type", [])
    return frozenset([declared] if isinstance(declared, str) else declared)


def _env_value(path: list[str], raw: str) -> Any:
    """An environment string typed as the schema types the key.

    Only a key the schema types as a number or a boolean is read as one: a password, a bucket or an
    access key made only of digits (or spelled ``yes``) stays the string it was given.
    """
    if path[-1] in _LIST_KEYS:
        return [item.strip() for item in raw.split(",") if item.strip()]
    if "string" in _schema_types(path) or not raw.strip():
        return raw
    value = yaml.safe_load(raw)
    return value if isinstance(value, bool | int | float) else raw


def _apply_env(
    document: dict[str, Any], environ: Mapping[str, str], master_key_env: str | None, origins: _Origins
) -> None:
    for name in sorted(environ):
        # WEPUSH_MASTER_KEY not named by secrets.master-key-env is refused once the key file's path is
        # known (_refuse_unused_master_key_variable).
        if not name.startswith("WEPUSH_") or name in (*RESERVED_ENV, master_key_env, MASTER_KEY_VARIABLE):
            continue
        path = _env_path(name, _DEFAULTS)
        node = document["wepush"]
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = _env_value(path, environ[name])
        origins.set(path, f"environment variable {name}")


def _master_key_env(document: dict[str, Any], environ: Mapping[str, str]) -> str | None:
    """The variable ``secrets.master-key-env`` names, from the file or the environment (read before the
    other variables, so the one it names is not taken for an unknown key)."""
    named = environ.get("WEPUSH_SECRETS_MASTER_KEY_ENV")
    if named is None:
        named = document["wepush"]["secrets"].get("master-key-env")
    return str(named) if named else None


def _refuse_unused_master_key_variable(document: dict[str, Any], environ: Mapping[str, str]) -> None:
    """WEPUSH_MASTER_KEY is read only when secrets.master-key-env opts in: set without that, the operator
    meant the key to come from it while the Service used another, and a variable that does nothing is an
    error here, as any other unknown WEPUSH_* variable is. Its value is never quoted."""
    secrets = document["wepush"]["secrets"]
    if MASTER_KEY_VARIABLE not in environ or secrets.get("master-key-env") == MASTER_KEY_VARIABLE:
        return
    if secrets.get("master-key-env"):
        used = f"the environment variable {secrets['master-key-env']}"
    else:
        used = f"the key file {secrets['master-key-file']}"
    raise ConfigError(
        f"environment variable {MASTER_KEY_VARIABLE} is set, but the master key is read from {used}: set "
        f"secrets.master-key-env: {MASTER_KEY_VARIABLE} (or WEPUSH_SECRETS_MASTER_KEY_ENV="
        f"{MASTER_KEY_VARIABLE}) to read it from the variable, or unset the variable"
    )


def _expand(node: Any, variables: Mapping[str, str]) -> Any:
    if isinstance(node, dict):
        return {key: _expand(value, variables) for key, value in node.items()}
    if isinstance(node, list):
        return [_expand(value, variables) for value in node]
    if isinstance(node, str):
        for name, value in variables.items():
            node = node.replace("${" + name + "}", value)
    return node


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as handle:
            loaded = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"configuration file not found: {path}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        # A directory, a file the user may not read: one line naming the file, never a traceback.
        raise ConfigError(f"{path}: cannot read the configuration file ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc.__class__.__name__})") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the document must be a mapping with a top-level 'wepush' key")
    return loaded


#: Every duration key, and the bounds it must lie within (inclusive; ``None``: unbounded).
_DURATIONS: dict[tuple[str, ...], tuple[timedelta | None, timedelta | None, str]] = {
    ("events", "progress-interval"): (
        timedelta(seconds=0.5),
        timedelta(seconds=1),
        "must be between PT0.5S and PT1S",
    ),
    # Zero would send heartbeats (and check the stream's credential against the database) in a busy loop.
    ("events", "sse-heartbeat"): (timedelta(microseconds=1), None, "must be longer than PT0S"),
    # Signature V4 refuses a presigned URL valid longer than seven days; a zero lifetime is never usable.
    ("artifacts", "s3", "presign-ttl"): (
        timedelta(seconds=1),
        timedelta(days=7),
        "must be between PT1S and P7D",
    ),
}


def _check_durations(document: dict[str, Any], origins: _Origins) -> None:
    """Each duration parses and lies within its bounds; a failure names the key (an out-of-range value
    used to escape as a ValueError traceback from building the settings)."""
    for path, (low, high, rule) in _DURATIONS.items():
        node: Any = document["wepush"]
        for key in path:
            node = node[key]
        try:
            value = parse_duration(node)
        except ValueError as exc:
            raise origins.error(path, str(exc)) from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise origins.error(path, rule)


def _check_finite(node: Any, origins: _Origins, path: tuple[str, ...] = ()) -> None:
    """YAML spells NaN and infinity (``.nan``, ``.inf``) and the schema's bounds let them through (no
    comparison with NaN fails): a NaN request budget silently turned rate limiting off."""
    if isinstance(node, dict):
        for key, value in node.items():
            _check_finite(value, origins, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _check_finite(value, origins, (*path, str(index)))
    elif isinstance(node, float) and not math.isfinite(node):
        raise origins.error(path, "must be a finite number")


def _check_bind_address(document: dict[str, Any], origins: _Origins) -> None:
    """Listening beyond loopback is an explicit decision (security.remote-access), never a default."""
    address = str(document["wepush"]["server"]["bind-address"])
    try:
        loopback = ipaddress.ip_address(address).is_loopback
    except ValueError:
        loopback = address == "localhost"
    if not loopback and not document["wepush"]["security"]["remote-access"]:
        raise origins.error(
            ("server", "bind-address"),
            f"{address} is not a loopback address; "
            "set wepush.security.remote-access: true to listen on other interfaces",
        )


def _check_database(document: dict[str, Any], origins: _Origins) -> None:
    """A URL the Service could not open fails here, naming the key, not as a traceback at start. The URL
    itself is never quoted: it may carry a password."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    database = document["wepush"]["database"]
    if not database["url"]:
        if database["type"] != "sqlite":
            raise ConfigError(f"wepush.database.url: database.type {database['type']} needs the server's URL")
        return
    url = ("database", "url")
    try:
        backend = make_url(database["url"]).get_backend_name()
    except (ArgumentError, ValueError):
        raise origins.error(
            url, "not a database URL (sqlite:///PATH or postgresql://USER@HOST:PORT/NAME)"
        ) from None
    if backend not in ("sqlite", "postgresql"):
        raise origins.error(url, f"unsupported database {backend!r}; use sqlite or postgresql")
    # type defaults to sqlite, so only an explicit postgresql can contradict the URL: a server meant for
    # PostgreSQL must not quietly run on a SQLite file a stale URL names.
    if database["type"] == "postgresql" and backend != "postgresql":
        raise origins.error(url, f"database.type is postgresql, but the URL names a {backend} database")


def load_config(
    config_file: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
    data_dir: Path | None = None,
) -> ServiceConfig:
    """Build the effective configuration. Raises ConfigError naming the offending key."""
    env = dict(os.environ if environ is None else environ)
    resolved_data = data_dir or Path(env.get("WEPUSH_DATA_DIR") or Path.home() / ".local/share/wepush-next")
    resolved_data = resolved_data.expanduser().absolute()
    config_dir = (
        Path(env.get("WEPUSH_CONFIG_DIR") or Path.home() / ".config/wepush-next").expanduser().absolute()
    )

    file_path = config_file or (Path(env["WEPUSH_CONFIG"]) if env.get("WEPUSH_CONFIG") else None)
    if file_path is None and (config_dir / "wepush.yaml").is_file():
        file_path = config_dir / "wepush.yaml"

    document = default_document()
    origins = _Origins()
    if file_path is not None:
        from_file = _read_file(file_path)
        _validate(_merge(default_document(), from_file), str(file_path))
        _merge(document, from_file)
        origins.set_tree(from_file.get("wepush"), str(file_path))
    _apply_env(document, env, _master_key_env(document, env), origins)
    if host is not None:
        document["wepush"]["server"]["bind-address"] = host
        origins.set(("server", "bind-address"), "--host")
    if port is not None:
        document["wepush"]["server"]["port"] = port
        origins.set(("server", "port"), "--port")
    file_data_dir = document["wepush"].get("data-dir")
    if data_dir is None and not env.get("WEPUSH_DATA_DIR") and file_data_dir:
        resolved_data = Path(file_data_dir).expanduser().absolute()
    document["wepush"]["data-dir"] = str(resolved_data)
    document = _expand(
        document, {"WEPUSH_DATA_DIR": str(resolved_data), "WEPUSH_CONFIG_DIR": str(config_dir)}
    )
    _validate(document, "effective configuration", origins)
    _refuse_unused_master_key_variable(document, env)
    _check_finite(document["wepush"], origins)
    _check_durations(document, origins)
    _check_bind_address(document, origins)
    artifacts = document["wepush"]["artifacts"]
    if artifacts["type"] == "s3" and not (artifacts.get("s3") or {}).get("bucket"):
        raise ConfigError(
            "wepush.artifacts.s3.bucket: artifacts.type s3 needs the bucket to store artifacts in"
        )
    if document["wepush"]["mode"] == "server" and not document["wepush"]["database"]["url"]:
        raise ConfigError("wepush.database.url: server mode needs a PostgreSQL URL")
    _check_database(document, origins)
    return build_config(document, resolved_data, config_dir)
