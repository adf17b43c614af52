"""Where an s3:// store's endpoint and keys come from: the environment or a config file, never a spec.

A spec travels (into manifests, Argo parameters, the Sweep resource), so it must never carry a
secret; the store URL only names a bucket and prefix.  Precedence, highest first:

1. CCSWEEP_S3_* variables (ENDPOINT, ACCESS_KEY, SECRET_KEY, SESSION_TOKEN, SECURE, REGION,
   PATH_STYLE, CA_BUNDLE, VERIFY);
2. the AWS names other tools use (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
   AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, AWS_CA_BUNDLE);
3. the YAML file $CCSWEEP_S3_CONFIG, else ~/.config/ccsweep/s3.yaml (same keys in lower case).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ccsweep.store.base import StoreError

#: Keys of the config file, each with its environment variables in order of precedence.
ENV_NAMES: dict[str, tuple[str, ...]] = {
    "endpoint": ("CCSWEEP_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "access_key": ("CCSWEEP_S3_ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
    "secret_key": ("CCSWEEP_S3_SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
    "session_token": ("CCSWEEP_S3_SESSION_TOKEN", "AWS_SESSION_TOKEN"),
    "secure": ("CCSWEEP_S3_SECURE",),
    "region": ("CCSWEEP_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
    "path_style": ("CCSWEEP_S3_PATH_STYLE",),
    "ca_bundle": ("CCSWEEP_S3_CA_BUNDLE", "AWS_CA_BUNDLE"),
    "verify": ("CCSWEEP_S3_VERIFY",),
}

AWS_ENDPOINT = "s3.amazonaws.com"
#: Settings whose value an error message may show; any other (keys, tokens, a misspelt key that
#: may hold one) is named but never printed, since errors reach logs, pod statuses and Events.
SHOWN = frozenset({"endpoint", "secure", "region", "path_style", "ca_bundle", "verify"})


class S3Settings(BaseModel):
    """How to reach the S3 server; `endpoint` is host[:port], TLS is `secure`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str = AWS_ENDPOINT
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    secure: bool = True
    region: str | None = None
    path_style: bool | None = None  # None: the client's choice (virtual-host style for AWS only)
    ca_bundle: Path | None = None
    verify: bool = True


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("CCSWEEP_S3_CONFIG"):
        return Path(env["CCSWEEP_S3_CONFIG"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "ccsweep" / "s3.yaml"


def load_settings(env: Mapping[str, str] | None = None) -> S3Settings:
    """Merge the config file and the environment; a bad value is a one-line StoreError."""
    env = os.environ if env is None else env
    values: dict[str, object] = {}
    origin: dict[str, str] = {}
    path = config_path(env)
    if path.is_file() or env.get("CCSWEEP_S3_CONFIG"):
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except OSError as exc:
            raise StoreError(f"S3 config {path}: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:  # its text quotes the offending line, which may hold a key
            raise StoreError(f"S3 config {path}: not valid YAML{_position(exc)}") from None
        if not isinstance(loaded, dict):
            raise StoreError(f"S3 config {path}: expected a mapping of {', '.join(ENV_NAMES)}")
        values.update(loaded)
        origin.update({k: f"{path}: {k}" for k in loaded})
    for key, names in ENV_NAMES.items():
        name = next((n for n in names if env.get(n)), None)
        if name is not None:
            values[key] = env[name]
            origin[key] = name
    if "endpoint" in values:
        _split_endpoint(values, origin)
    try:
        return S3Settings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err["loc"] else "?"
        allowed = {"bool_parsing": " (allowed: true or false)",
                   "extra_forbidden": f" (allowed: {', '.join(ENV_NAMES)})"}
        shown = f"={values.get(key)!r}" if key in SHOWN else " (value not shown)"
        raise StoreError(f"S3 setting {origin.get(key, key)}{shown}: {err['msg']}"
                         f"{allowed.get(err['type'], '')}") from None


def _position(exc: yaml.YAMLError) -> str:
    """Where in the file YAML failed (line and column), without the file's text."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{where}: {problem}" if problem else where


def _split_endpoint(values: dict[str, object], origin: dict[str, str]) -> None:
    """Accept `host:port` or a URL (AWS_ENDPOINT_URL is one); a URL's scheme sets `secure` unless given."""
    endpoint = str(values["endpoint"])
    if "@" in endpoint:  # user:password@host: keys belong in their own settings, never in a URL
        raise StoreError(f"S3 setting {origin['endpoint']} (value not shown): credentials in the endpoint; "
                         "expected host:port or http(s)://host:port, keys in access_key and secret_key")
    if "://" not in endpoint:
        return
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip("/"):
        raise StoreError(f"S3 setting {origin['endpoint']}={endpoint!r}: expected host:port or http(s)://host:port")
    values["endpoint"] = parts.netloc
    values.setdefault("secure", parts.scheme == "https")
