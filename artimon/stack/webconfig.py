"""``artimon up --web.config.file``: every HTTP port of the stack (the query API, VHMS's, the
agent's monitoring) served behind the operator's web configuration file, and the stack's
own scrapes of those ports let through.

The file holds only bcrypt hashes, so ``up``'s agent cannot use its users: at each start
``up`` makes a user of its own, :data:`SELF_USER` with a random password kept in
``<data-dir>/self-scrape.pass`` (mode 0600 from its creation, written anew each start), and
serves the file's users plus that one (in memory: the file is not changed). Its agent's
self-scraping ``prometheus`` sources trust the certificate the file serves (pinned, copied
to ``<data-dir>/self-scrape-ca.pem``) and authenticate as that user, through
``${ARTIMON_SELF_CA}``, ``${ARTIMON_SELF_USER}`` and ``${ARTIMON_SELF_PASSWORD_FILE}`` (empty
without a file, or without ``basic_auth_users``: then no user is added, so a TLS-only file
stays TLS-only). ``${ARTIMON_WEB_CONFIG_FILE}`` names the operator's file, for a
``prometheus_remote_write`` source added to the agent's properties (``webConfigFile``).

A file that requires client certificates (``RequireAndVerifyClientCert``) is refused: the
agent has no certificate the operator's CA signed.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

import bcrypt

from artimon.stack.credentials import write_private
from bookkeeper.ground import WebConfig, WebConfigError

__all__ = ["PASSWORD_FILE", "SELF_USER", "stack_web_config"]

SELF_USER = "artimon-up-self-scrape"
PASSWORD_FILE = "self-scrape.pass"
CA_FILE = "self-scrape-ca.pem"


def stack_web_config(data: Path, config: WebConfig | None, file: Path | None) -> WebConfig | None:
    """What the stack's ports serve with (see the module doc), the environment of the agent's
    properties set; :class:`WebConfigError` for a file the stack cannot scrape itself through."""
    environment = dict.fromkeys(("ARTIMON_SELF_CA", "ARTIMON_SELF_USER", "ARTIMON_SELF_PASSWORD_FILE"), "")
    environment["ARTIMON_WEB_CONFIG_FILE"] = str(file.resolve()) if file is not None else ""
    served = config
    if config is not None:
        if config.client_certs_required:
            raise WebConfigError(
                f"web config {config.path}: tls_server_config.client_auth_type: RequireAndVerifyClientCert "
                "is not for `artimon up`, whose agent scrapes the stack's own ports with no client "
                "certificate: use VerifyClientCertIfGiven, with basic_auth_users for credentials"
            )
        if SELF_USER in config.users:
            raise WebConfigError(f"web config {config.path}: basic_auth_users.{SELF_USER}: is up's own user")
        data.mkdir(parents=True, exist_ok=True)
        if config.certificates:
            write_private(data / CA_FILE, config.certificates)
            environment["ARTIMON_SELF_CA"] = str(data / CA_FILE)
        if config.users:
            password = secrets.token_urlsafe(24)
            write_private(data / PASSWORD_FILE, password + "\n")
            hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(10))
            served = dataclasses.replace(config, users={**config.users, SELF_USER: hashed})
            environment.update(
                ARTIMON_SELF_USER=SELF_USER, ARTIMON_SELF_PASSWORD_FILE=str(data / PASSWORD_FILE)
            )
    os.environ.update(environment)
    return served
