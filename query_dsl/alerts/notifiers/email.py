"""``type: email``: one plain-text mail per notification over SMTP (smtplib).

Settings: ``to`` (list), ``from``, ``smtp_host`` (localhost), ``smtp_port`` (25),
``starttls`` (false), ``ca_file`` (to trust a private CA with STARTTLS), ``username`` and
``password`` (both or neither; write ``${ENV_NAME}`` to keep secrets out of the file),
``timeout`` (a duration, 30s). The subject is ``[FIRING:n] rule`` or ``[RESOLVED] rule``; the body
lists each alert with its value, annotations and labels.
"""

from __future__ import annotations

import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr

from query_dsl.alerts.fields import Fields
from query_dsl.alerts.model import Notification
from query_dsl.exceptions import NotifyError

__all__ = ["EmailNotifier"]


@dataclass
class EmailNotifier:
    name: str
    to: list[str]
    sender: str
    smtp_host: str = "localhost"
    smtp_port: int = 25
    starttls: bool = False
    ca_file: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 30.0

    @classmethod
    def from_options(cls, name: str, fields: Fields) -> EmailNotifier:
        to = fields.texts("to", env=True)
        sender = fields.text("from", env=True)
        for key, address in [("from", sender), *(("to", a) for a in to)]:
            if "@" not in parseaddr(address)[1]:
                raise fields.error(key, f"{address!r} is not a mail address")
        username = fields.text("username", "", env=True) or None
        password = fields.text("password", "", env=True) or None
        if (username is None) != (password is None):
            raise fields.error("username", "give both username and password, or neither")
        starttls = fields.boolean("starttls", False)
        if username and not starttls:
            raise fields.error("username", "a password is only sent over STARTTLS: set starttls: true")
        return cls(
            name,
            to=to,
            sender=sender,
            smtp_host=fields.text("smtp_host", "localhost", env=True),
            smtp_port=fields.integer("smtp_port", 25, 1, 65535),
            starttls=starttls,
            ca_file=fields.text("ca_file", "", env=True) or None,
            username=username,
            password=password,
            timeout=fields.seconds("timeout", 30.0, 0.1, 600.0),
        )

    def message(self, notification: Notification) -> EmailMessage:
        message = EmailMessage()
        message["Subject"] = notification.subject
        message["From"] = self.sender
        message["To"] = ", ".join(self.to)
        message["Date"] = formatdate(notification.at_ms / 1000, usegmt=True)
        message["Message-ID"] = make_msgid(
            "artimon", domain=self.sender.rpartition("@")[2].strip("> ") or None
        )
        message.set_content(notification.text())
        return message

    def send(self, notification: Notification) -> None:
        where = f"{self.smtp_host}:{self.smtp_port}"
        try:
            with smtplib.SMTP(self.smtp_host, self.smtp_port, timeout=self.timeout) as smtp:
                if self.starttls:
                    smtp.starttls(context=ssl.create_default_context(cafile=self.ca_file))
                if self.username is not None and self.password is not None:
                    smtp.login(self.username, self.password)
                smtp.send_message(self.message(notification), self.sender, self.to)
        except smtplib.SMTPRecipientsRefused as exc:
            raise NotifyError(f"{where} refused every recipient: {exc.recipients}", retryable=False) from None
        except smtplib.SMTPResponseException as exc:
            # 5xx is the server's final word (bad credentials, policy); 4xx may pass later
            raise NotifyError(
                f"{where} answered {exc.smtp_code} {exc.smtp_error!r}", retryable=exc.smtp_code < 500
            ) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise NotifyError(f"cannot send mail through {where}: {exc}") from None

    def close(self) -> None:
        """Nothing stays open between notifications."""
