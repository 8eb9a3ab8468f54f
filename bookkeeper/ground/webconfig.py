"""Prometheus's web configuration file (exporter-toolkit's ``--web.config.file``), read
strictly: TLS for an HTTP listener, basic-auth users with bcrypt hashes, response headers
and a request rate limit, so that an operator's existing file works on Artimon's ports.

Every key of the format is known; one it does not have, a value of the wrong type, or a
setting this server cannot honour is a :class:`WebConfigError` naming the key (never a
setting silently ignored). Relative file names are read from the file's directory, as
Prometheus does. What is refused here and why:

- ``client_auth_type`` ``RequestClientCert`` and ``RequireAnyClientCert``: Python's TLS
  verifies every certificate it asks for, so a certificate that is not checked cannot be
  asked for; ``VerifyClientCertIfGiven`` and ``RequireAndVerifyClientCert`` are;
- ``client_allowed_sans`` and ``curve_preferences``: Python's ``ssl`` module has no hook
  for either (restrict clients by the CA that signs them; OpenSSL's curves are used);
- ``http_server_config.http2: true`` is accepted and served as HTTP/1.1 (clients fall
  back by ALPN, as they do when Prometheus's ``http2`` is ``false``).

The file is read once, when the server starts (Prometheus re-reads it per request).
"""

from __future__ import annotations

import ipaddress
import re
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bookkeeper.ground.durations import parse_duration

__all__ = ["WebConfig", "WebConfigError", "is_loopback", "load_web_config"]

MAX_FILE_BYTES = 1 << 20

_TOP_KEYS = ("tls_server_config", "http_server_config", "basic_auth_users", "rate_limit")
_TLS_KEYS = (
    "cert",
    "key",
    "client_ca",
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "cipher_suites",
    "curve_preferences",
    "min_version",
    "max_version",
    "prefer_server_cipher_suites",
    "client_allowed_sans",
)
_TLS_ON = ("cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file")
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
# Go's names (crypto/tls CipherSuites) of the TLS 1.2 suites, as OpenSSL names them; Go, like
# OpenSSL, does not let TLS 1.3's suites be configured, so those names are accepted and skipped
_CIPHERS = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_AES_128_GCM_SHA256": "",
    "TLS_AES_256_GCM_SHA384": "",
    "TLS_CHACHA20_POLY1305_SHA256": "",
}
_HEADERS = {
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}
_CERTIFICATE_RE = re.compile(r"-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----")
_BCRYPT_RE = re.compile(r"\$2[aby]\$(0[4-9]|[12]\d|3[01])\$[./A-Za-z0-9]{53}")


class WebConfigError(ValueError):
    """The web configuration file cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class WebConfig:
    """A web configuration file, read: ``tls`` is the server's context (``None``: plain
    HTTP) and ``certificates`` the certificate chain it serves (PEM, its ``CERTIFICATE``
    blocks only: what a client of this very process pins), ``users`` the bcrypt hash of each
    user, ``headers`` added to every answer, ``rate_interval_s`` and ``rate_burst`` a token
    bucket for all requests (0: none)."""

    path: Path
    tls: ssl.SSLContext | None = None
    certificates: str = ""
    users: dict[str, bytes] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()
    rate_interval_s: float = 0.0
    rate_burst: int = 0

    @property
    def client_certs_required(self) -> bool:
        return self.tls is not None and self.tls.verify_mode == ssl.CERT_REQUIRED

    @property
    def authenticates(self) -> bool:
        """Every request needs credentials: a user's password or a client certificate."""
        return bool(self.users) or self.client_certs_required

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"


def is_loopback(host: str) -> bool:
    """``host`` is a loopback address or ``localhost`` (any other name counts as beyond)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check ``path``; :class:`WebConfigError` says what is wrong and where."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise WebConfigError(f"web config {path}: cannot read it: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise WebConfigError(f"web config {path}: larger than {MAX_FILE_BYTES:,} bytes")
    try:
        document = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise WebConfigError(f"web config {path}: not YAML: {exc}") from None
    except (UnicodeDecodeError, RecursionError) as exc:
        raise WebConfigError(f"web config {path}: not YAML: {type(exc).__name__}") from None
    top = _mapping(path, "", {} if document is None else document, _TOP_KEYS)
    rate_interval_s, rate_burst = _rate_limit(path, top.get("rate_limit"))
    tls, certificates = _tls_context(path, top.get("tls_server_config"))
    return WebConfig(
        path=path,
        tls=tls,
        certificates=certificates,
        users=_users(path, top.get("basic_auth_users")),
        headers=_headers(path, top.get("http_server_config")),
        rate_interval_s=rate_interval_s,
        rate_burst=rate_burst,
    )


def _error(path: Path, key: str, why: str) -> WebConfigError:
    return WebConfigError(f"web config {path}: {key}: {why}")


def _mapping(path: Path, key: str, value: Any, known: tuple[str, ...]) -> dict[str, Any]:
    where = key or "the file"
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _error(path, where, f"must be a mapping, not {type(value).__name__}")
    for name in value:
        if name not in known:
            prefix = f"{key}." if key else ""
            raise _error(path, f"{prefix}{name}", f"unknown key (known: {', '.join(known)})")
    return value


def _string(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _error(path, key, f"must be a non-empty string, not {value!r:.80}")
    return value


def _strings(path: Path, key: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise _error(path, key, f"must be a list of strings, not {type(value).__name__}")
    return [_string(path, f"{key}[{i}]", item) for i, item in enumerate(value)]


def _bool(path: Path, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _error(path, key, f"must be true or false, not {value!r:.80}")
    return value


def _tls_context(path: Path, value: Any) -> tuple[ssl.SSLContext | None, str]:
    """The server's context and the PEM of the certificate chain it serves."""
    tls = _mapping(path, "tls_server_config", value, _TLS_KEYS)
    if not any(tls.get(key) not in (None, "") for key in _TLS_ON):
        return None, ""
    key = "tls_server_config"
    for unsupported in ("client_allowed_sans", "curve_preferences"):
        if tls.get(unsupported) is not None:
            raise _error(path, f"{key}.{unsupported}", "not supported by Python's ssl module; remove it")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _version(path, f"{key}.min_version", tls.get("min_version", "TLS12"))
    context.maximum_version = _version(path, f"{key}.max_version", tls.get("max_version", "TLS13"))
    if context.minimum_version > context.maximum_version:
        raise _error(path, f"{key}.min_version", "is above max_version")
    certificates = _load_certificate(path, tls, context)
    _client_auth(path, tls, context)
    if tls.get("cipher_suites") is not None:
        _ciphers(path, _strings(path, f"{key}.cipher_suites", tls["cipher_suites"]), context)
    if _bool(path, f"{key}.prefer_server_cipher_suites", tls.get("prefer_server_cipher_suites", True)):
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    return context, certificates


def _version(path: Path, key: str, value: Any) -> ssl.TLSVersion:
    if not isinstance(value, str) or value not in _VERSIONS:
        raise _error(path, key, f"{value!r:.80} is not one of {', '.join(_VERSIONS)}")
    return _VERSIONS[value]


def _pem(path: Path, tls: dict[str, Any], inline: str, file_key: str) -> tuple[str, str] | None:
    """``(text or file name, how it is named)``: the inline PEM or the file (relative to
    the config file's directory); both given is an error, as neither is a choice."""
    key = "tls_server_config"
    has_inline, has_file = tls.get(inline) not in (None, ""), tls.get(file_key) not in (None, "")
    if has_inline and has_file:
        raise _error(path, f"{key}.{inline}", f"give {inline} or {file_key}, not both")
    if has_inline:
        return _string(path, f"{key}.{inline}", tls[inline]), "inline"
    if has_file:
        name = path.parent / _string(path, f"{key}.{file_key}", tls[file_key])
        return str(name), "file"
    return None


def _load_certificate(path: Path, tls: dict[str, Any], context: ssl.SSLContext) -> str:
    """Load the chain and key into ``context``; the chain's ``CERTIFICATE`` blocks."""
    cert = _pem(path, tls, "cert", "cert_file")
    key = _pem(path, tls, "key", "key_file")
    if cert is None:
        raise _error(path, "tls_server_config", "missing one of cert or cert_file")
    if key is None:
        raise _error(path, "tls_server_config", "missing one of key or key_file")
    with tempfile.TemporaryDirectory(prefix="artimon-webconfig-") as scratch:
        files = []
        for (value, kind), name in ((cert, "cert"), (key, "key")):
            if kind == "inline":  # the ssl module loads a chain from files only (the directory is 0700)
                text, value = value, str(Path(scratch) / name)
                Path(value).write_text(text, encoding="utf-8")
            elif not Path(value).is_file():
                raise _error(path, f"tls_server_config.{name}_file", f"{value} is not a readable file")
            files.append(value)
        try:
            context.load_cert_chain(files[0], files[1])
        except (ssl.SSLError, OSError) as exc:
            why = f"cannot load the certificate and key: {exc}"
            raise _error(path, "tls_server_config.cert", why) from None
        return "".join(f"{block}\n" for block in _CERTIFICATE_RE.findall(Path(files[0]).read_text("latin-1")))


def _client_auth(path: Path, tls: dict[str, Any], context: ssl.SSLContext) -> None:
    key = "tls_server_config.client_auth_type"
    auth = tls.get("client_auth_type") or "NoClientCert"
    if not isinstance(auth, str):
        raise _error(path, key, f"must be a string, not {type(auth).__name__}")
    if auth in _UNVERIFIED_CLIENT_AUTH:
        raise _error(
            path,
            key,
            f"{auth} (a certificate asked for but not verified) is not supported: use "
            "RequireAndVerifyClientCert or VerifyClientCertIfGiven with client_ca_file",
        )
    if auth not in _CLIENT_AUTH:
        raise _error(path, key, f"{auth!r:.80} is not one of {', '.join(_CLIENT_AUTH)}")
    ca = _pem(path, tls, "client_ca", "client_ca_file")
    if ca is not None and auth == "NoClientCert":
        raise _error(path, key, "client CAs are configured without a client auth policy")
    if ca is None and auth != "NoClientCert":
        raise _error(path, key, f"{auth} needs client_ca_file or client_ca")
    if ca is None:
        return
    value, kind = ca
    try:
        if kind == "inline":
            context.load_verify_locations(cadata=value)
        else:
            context.load_verify_locations(cafile=value)
    except (ssl.SSLError, OSError, ValueError) as exc:
        name = "client_ca" if kind == "inline" else "client_ca_file"
        raise _error(path, f"tls_server_config.{name}", f"no CA certificate could be loaded: {exc}") from None
    context.verify_mode = _CLIENT_AUTH[auth]


def _ciphers(path: Path, names: list[str], context: ssl.SSLContext) -> None:
    openssl_names = []
    for i, name in enumerate(names):
        if name not in _CIPHERS:
            raise _error(path, f"tls_server_config.cipher_suites[{i}]", f"unknown cipher {name!r:.80}")
        if _CIPHERS[name]:
            openssl_names.append(_CIPHERS[name])
    if openssl_names:
        try:
            context.set_ciphers(":".join(openssl_names))
        except ssl.SSLError as exc:
            raise _error(path, "tls_server_config.cipher_suites", f"OpenSSL refused them: {exc}") from None


def _headers(path: Path, value: Any) -> tuple[tuple[str, str], ...]:
    http = _mapping(path, "http_server_config", value, ("http2", "headers"))
    if "http2" in http:
        _bool(path, "http_server_config.http2", http["http2"])
    headers = _mapping(path, "http_server_config.headers", http.get("headers"), tuple(_HEADERS))
    chosen = []
    for name, text in headers.items():
        key = f"http_server_config.headers.{name}"
        if text in (None, ""):
            continue
        text = _string(path, key, text)
        allowed = _HEADERS[name]
        if allowed is not None and text.lower() not in allowed:
            raise _error(path, key, f"{text!r:.80} is not one of {', '.join(allowed)}")
        if not text.isascii() or any(c in text for c in "\r\n\0"):
            raise _error(path, key, "must be ASCII without line breaks or NUL")
        chosen.append((name, text))
    return tuple(chosen)


def _users(path: Path, value: Any) -> dict[str, bytes]:
    key = "basic_auth_users"
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _error(path, key, f"must be a mapping of user to bcrypt hash, not {type(value).__name__}")
    users = {}
    for user, hashed in value.items():
        if not isinstance(user, str) or not user or ":" in user:
            raise _error(path, f"{key}.{user!r:.80}", "a user name is a non-empty string without ':'")
        if not isinstance(hashed, str) or not _BCRYPT_RE.fullmatch(hashed):
            raise _error(path, f"{key}.{user}", "is not a bcrypt hash ($2a$, $2b$ or $2y$, cost 4-31)")
        users[user] = hashed.encode("ascii")
    return users


def _rate_limit(path: Path, value: Any) -> tuple[float, int]:
    rate = _mapping(path, "rate_limit", value, ("interval", "burst"))
    interval = rate.get("interval", "0s")
    if isinstance(interval, int) and not isinstance(interval, bool) and interval == 0:
        interval = "0s"
    try:
        interval_s = parse_duration(_string(path, "rate_limit.interval", interval)) / 1000
    except ValueError as exc:
        raise _error(path, "rate_limit.interval", str(exc)) from None
    burst = rate.get("burst", 0)
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 0:
        raise _error(path, "rate_limit.burst", f"must be a non-negative integer, not {burst!r:.80}")
    if interval_s > 0 and burst == 0:
        raise _error(path, "rate_limit.burst", "must be at least 1 when an interval is set")
    return interval_s, burst
