"""The commands as an operator runs them: credentials from ``--zk-auth-file``, those ``artimon
up`` keeps in its data directory, and an agent file whose ``type`` names something that is
no component."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from artimon.stack import CREDENTIALS_FILE, stack_credentials
from bookkeeper import ZkAuthError
from bookkeeper.zk import AUTH_ENV, AUTH_FILE_ENV, ZkAuth, make_client, resolve_zk, resolve_zk_auth

ARTIMON = [sys.executable, "-m", "artimon"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (AUTH_ENV, AUTH_FILE_ENV)}


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ARTIMON, *args], capture_output=True, text=True, timeout=timeout, env=_env())


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (
            "a1.sources.r1.selector.type = builtins:exit",
            "selector type 'builtins:exit' is builtins:exit, a Quitter",
        ),
        ("a1.sources.r1.selector.type = os:abort", "selector type 'os:abort' is os:abort, a builtin"),
        ("a1.sinks.k1.type = collector_agent.config:parse_agent", "a function, not a class"),
        ("a1.sinks.k1.type = collector_agent.sources.seq:SequenceSource", "which is not a Sink"),
    ],
)
def test_agent_refuses_a_type_that_is_no_component_with_exit_2(
    tmp_path: Path, setting: str, expected: str
) -> None:
    conf = tmp_path / "agent.properties"
    conf.write_text(
        "a1.sources = r1\na1.channels = c1\na1.sinks = k1\n"
        "a1.sources.r1.type = seq\na1.sources.r1.channels = c1\n"
        "a1.channels.c1.type = memory\na1.sinks.k1.type = null\na1.sinks.k1.channel = c1\n" + setting + "\n"
    )
    result = _run("agent", "-f", str(conf), "-n", "a1", "--no-monitor")
    assert result.returncode == 2, (result.returncode, result.stderr)  # not aborted, not a silent exit
    assert expected in result.stderr


def test_bad_credentials_stop_a_command_without_showing_the_password(tmp_path: Path) -> None:
    secret = tmp_path / "zk.auth"
    secret.write_text("no-colon-s3cr3t\n")
    result = _run("--zk-auth-file", str(secret), "endpoints")
    assert result.returncode == 2
    assert "must be user:password" in result.stderr and "s3cr3t" not in result.stderr
    missing = _run("--zk-auth-file", str(tmp_path / "missing"), "endpoints")
    assert missing.returncode == 2 and "cannot be read" in missing.stderr


@pytest.mark.slow
def test_a_command_given_an_auth_file_registers_with_the_acl(
    tmp_path: Path, zk_hosts: str, wait: Callable[..., None]
) -> None:
    auth = ZkAuth("artimon", uuid.uuid4().hex)
    secret = tmp_path / "zk.auth"
    secret.write_text(f"{auth.user}:{auth.password}\n")
    secret.chmod(0o600)
    connect, layout = resolve_zk(zk_hosts)
    process = subprocess.Popen(
        [
            *ARTIMON,
            "--zk-auth-file",
            str(secret),
            "vhms",
            "--zk",
            zk_hosts,
            *("--shard", "s1", "--data-dir", str(tmp_path / "v")),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    admin = make_client(connect, auth=auth)
    anonymous = KazooClient(hosts=connect)  # no credentials, whatever the environment says
    admin.start(timeout=30)
    anonymous.start(timeout=30)
    try:
        shard = layout.vhms_shard("s1")
        wait(lambda: admin.exists(shard) and admin.get_children(shard), 30, "the shard member registered")
        (member,) = admin.get_children(layout.vhms_shard("s1"))
        assert admin.get_acls(f"{layout.vhms_shard('s1')}/{member}")[0] == auth.acl()
        with pytest.raises(NoAuthError):
            anonymous.create(layout.vhms_member("s1", "6.6.6.6", 666), b"{}", ephemeral=True)
    finally:
        admin.stop()
        admin.close()
        anonymous.stop()
        anonymous.close()
        process.terminate()
        process.communicate(timeout=60)
    assert process.returncode == 0


def test_up_makes_its_credentials_once_private_and_takes_given_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # setitem first, so that monkeypatch restores the variables' state from before the test
    # (stack_credentials sets AUTH_FILE_ENV itself; a later delenv alone would restore that)
    for name in (AUTH_ENV, AUTH_FILE_ENV):
        monkeypatch.setitem(os.environ, name, "")
        monkeypatch.delenv(name)
    data = tmp_path / "data"
    path = data / CREDENTIALS_FILE
    assert stack_credentials(data) == f"{AUTH_FILE_ENV}={path}"
    assert os.environ[AUTH_FILE_ENV] == str(path)  # every component and child process reads it
    assert path.stat().st_mode & 0o777 == 0o600
    first = resolve_zk_auth()
    assert first is not None and first.user == "artimon" and len(first.password) >= 32
    assert [p.name for p in data.iterdir()] == [CREDENTIALS_FILE]  # no partial file left
    monkeypatch.delenv(AUTH_FILE_ENV)
    stack_credentials(data)  # the next start: the same identity, or its ACLs would lock it out
    assert resolve_zk_auth() == first
    monkeypatch.delenv(AUTH_FILE_ENV)
    path.chmod(0o644)
    with pytest.raises(ZkAuthError, match="may be read by others") as refused:
        stack_credentials(data)
    assert first.password not in str(refused.value)
    given = tmp_path / "site.auth"
    given.write_text("site:s3cr3t\n")
    monkeypatch.setenv(AUTH_FILE_ENV, str(given))  # --zk-auth-file: a site's shared identity
    assert stack_credentials(tmp_path / "other") == f"{AUTH_FILE_ENV}={given}"
    assert not (tmp_path / "other" / CREDENTIALS_FILE).exists()
    monkeypatch.delenv(AUTH_FILE_ENV)
    monkeypatch.setenv(AUTH_ENV, "site:s3cr3t")
    assert stack_credentials(tmp_path / "other") == f"${AUTH_ENV}"
    monkeypatch.setenv(AUTH_ENV, "no-colon")
    with pytest.raises(ZkAuthError):
        stack_credentials(tmp_path / "other")


def test_up_refuses_credentials_others_may_read_with_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / CREDENTIALS_FILE).write_text("artimon:s3cr3t\n")
    (data / CREDENTIALS_FILE).chmod(0o640)
    result = _run("up", "--no-spark", "--rounds", "1", "--zk-port", "0", "--data-dir", str(data))
    assert result.returncode == 2, result.stderr
    assert "may be read by others (mode 640)" in result.stderr and "s3cr3t" not in result.stderr
    assert not (data / "zookeeper").exists()  # refused before anything started
