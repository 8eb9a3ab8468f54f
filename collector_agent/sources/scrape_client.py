"""How the ``prometheus`` source (and ``jmx``, on it) reaches its targets: Prometheus's own
scrape-config knobs, as properties keys in the source's camelCase.

- ``scheme`` (``scheme``): of a ``host:port`` target, ``http`` by default (a URL keeps its own);
- ``tls_config.ca_file`` (``tlsCaFile``): the CAs trusted, the system's by default;
- ``tls_config.cert_file``, ``key_file`` (``tlsCertFile``, ``tlsKeyFile``): a client
  certificate, for targets that ask for one;
- ``tls_config.server_name`` (``tlsServerName``): the name the target's certificate must
  bear (and the SNI), the URL's host by default;
- ``tls_config.insecure_skip_verify`` (``tlsInsecureSkipVerify``): ``false`` by default;
- ``basic_auth.username``, ``password_file`` (``basicAuthUsername``,
  ``basicAuthPasswordFile``): none by default; a user without a file has an empty password.

An empty value is an absent key (so that ``${NAME}`` set to nothing turns a knob off). As in
Prometheus, a CA file may name the target's own certificate rather than its issuer (Go's
verifier trusts a root pool's leaf; OpenSSL does with ``VERIFY_X509_PARTIAL_CHAIN``), and
the password file's surrounding whitespace is not part of the password. The password is
read once, at configuration (an edit of the properties file reloads it); the basic-auth
header is dropped on a redirect to another host (urllib3's rule), as Go's client does.
"""

from __future__ import annotations

import logging
import ssl
import warnings
from pathlib import Path
from typing import Any

import urllib3

from bookkeeper import TlsConfigError
from bookkeeper.wire import client_context
from collector_agent.context import Context

__all__ = ["scrape_pool_options"]

_MAX_PASSWORD_FILE = 64 * 1024
log = logging.getLogger(__name__)
# urllib3 warns at every request to a target whose certificate is not checked; a source asked
# for that says it once, when configured (urllib3 serves only the scrapes in the agent)
warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)


def _key(context: Context, key: str) -> str | None:
    value = context.get_optional(key)
    return (value.strip() or None) if value is not None else None


def _ssl_options(context: Context) -> dict[str, Any]:
    ca, cert, key = _key(context, "tlsCaFile"), _key(context, "tlsCertFile"), _key(context, "tlsKeyFile")
    server_name = _key(context, "tlsServerName")
    insecure = _key(context, "tlsInsecureSkipVerify") is not None and context.get_bool(
        "tlsInsecureSkipVerify", False
    )
    if key is not None and cert is None:
        raise context.error("tlsKeyFile", "is given without tlsCertFile")
    if not (ca or cert or server_name or insecure):
        return {}
    try:
        tls = client_context(ca, certfile=cert, keyfile=key, check_hostname=not insecure)
    except TlsConfigError as exc:
        key_named = "tlsCaFile" if str(exc).startswith("CA file") else "tlsCertFile"
        raise context.error(key_named, str(exc)) from None
    tls.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    options: dict[str, Any] = {"ssl_context": tls}
    if insecure:
        log.warning(
            "%s: the targets' certificates are not checked", context.full_key("tlsInsecureSkipVerify")
        )
        options.update(cert_reqs="CERT_NONE", assert_hostname=False)
    if server_name is not None:
        options["server_hostname"] = server_name
    return options


def _basic_auth(context: Context) -> dict[str, str]:
    user, password_file = _key(context, "basicAuthUsername"), _key(context, "basicAuthPasswordFile")
    if user is None:
        if password_file is not None:
            raise context.error("basicAuthPasswordFile", "is given without basicAuthUsername")
        return {}
    if ":" in user:
        raise context.error("basicAuthUsername", f"{user!r}: a user name has no ':'")
    password = ""
    if password_file is not None:
        try:
            with Path(password_file).open("rb") as handle:
                raw = handle.read(_MAX_PASSWORD_FILE + 1)
        except OSError as exc:
            raise context.error("basicAuthPasswordFile", f"{password_file}: {exc.strerror}") from None
        if len(raw) > _MAX_PASSWORD_FILE:
            raise context.error("basicAuthPasswordFile", f"{password_file}: over {_MAX_PASSWORD_FILE} bytes")
        try:
            password = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise context.error("basicAuthPasswordFile", f"{password_file}: not UTF-8") from None
    return urllib3.util.make_headers(basic_auth=f"{user}:{password}")


def scrape_pool_options(context: Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The urllib3 ``PoolManager`` keyword arguments (TLS) and the headers (basic auth) that
    ``context``'s keys ask for (see the module doc); a key that cannot be used is the
    configuration's error, naming it."""
    return _ssl_options(context), _basic_auth(context)
