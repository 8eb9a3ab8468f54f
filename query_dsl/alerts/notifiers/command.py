"""``type: command``: run a program per notification, never through a shell.

Settings: ``argv`` (the program and its arguments), ``timeout`` (a duration, 30s). The notification's
JSON (:meth:`Notification.to_dict`) arrives on stdin; the environment adds
``ARTIMON_ALERT_RULE``, ``ARTIMON_ALERT_STATUS`` (firing or resolved),
``ARTIMON_ALERT_COUNT`` and ``ARTIMON_NOTIFIER``. Exit status 0 is delivered; another
status, or running past the timeout (the program's whole process group is then killed), is
a failure whose message ends with the last 500 bytes of its stderr. Its stdout is discarded.
The program is killed if the process that runs the alerts dies (:func:`bookkeeper.ground.spawn`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from dataclasses import dataclass

from bookkeeper.ground import spawn
from query_dsl.alerts.fields import Fields
from query_dsl.alerts.model import Notification
from query_dsl.exceptions import NotifyError

__all__ = ["CommandNotifier"]


@dataclass
class CommandNotifier:
    name: str
    argv: list[str]
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a command notifier needs argv: the program and its arguments")

    @classmethod
    def from_options(cls, name: str, fields: Fields) -> CommandNotifier:
        return cls(name, fields.texts("argv", env=True), timeout=fields.seconds("timeout", 30.0, 0.1, 3600.0))

    def send(self, notification: Notification) -> None:
        env = {
            **os.environ,
            "ARTIMON_ALERT_RULE": notification.rule,
            "ARTIMON_ALERT_STATUS": notification.status,
            "ARTIMON_ALERT_COUNT": str(len(notification.alerts)),
            "ARTIMON_NOTIFIER": self.name,
        }
        payload = json.dumps(notification.to_dict()).encode()
        with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: its size cannot grow our memory
            try:
                process = spawn(
                    self.argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise NotifyError(f"cannot run {self.argv[0]!r}: {exc}", retryable=False) from None
            try:
                process.communicate(payload, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):  # it may end on its own meanwhile
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise NotifyError(
                    f"{self.argv[0]!r} ran longer than {self.timeout:g} s and was killed"
                ) from None
            if process.returncode != 0:
                stderr.seek(max(0, stderr.seek(0, os.SEEK_END) - 500))
                tail = stderr.read().decode("utf-8", "replace").strip()
                raise NotifyError(f"{self.argv[0]!r} exited with status {process.returncode}: {tail}")

    def close(self) -> None:
        """Nothing stays open between notifications."""
