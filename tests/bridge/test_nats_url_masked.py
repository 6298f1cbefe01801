"""The bridge's own broker URL never shows its password, even when the broker is absent.

``nats_url`` may carry credentials (``nats://user:password@host``). With nothing
listening at its port, ``serve``, ``invoke`` and ``check-config --online`` (real
subprocesses of the installed command) each fail within ``nats_connect_timeout_s`` with a
line that names ``nats_url`` and shows the URL masked, and the password appears nowhere
in what they print, stdout or stderr, log records included.
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest

from tests.support.cli import run

PASSWORDS = ("s3cretNatsPw", "p@ssw0rd-Secret")  # an ``@`` inside: masked to the last one
SEAT = "--as=local.builder/01j9builder000000000000000"
LOG_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")
COMMANDS = {
    "serve": ["serve"],
    "invoke": ["invoke", "list-tasks", SEAT],
    "check-config-online": ["check-config", "--online"],
}


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("password", PASSWORDS)
@pytest.mark.parametrize("command", list(COMMANDS))
async def test_an_absent_broker_is_named_without_the_password(
    command: str, password: str, tmp_path: Path, closed_port: int
) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(
        f'space = "demo"\ndata_dir = "{tmp_path / "data"}"\n'
        f'nats_url = "nats://ops:{password}@127.0.0.1:{closed_port}"\n'
        "nats_connect_timeout_s = 1\n"
        '[http]\nenabled = false\n[[endpoints]]\nname = "com.acme.tasks"\n',
        encoding="utf-8",
    )

    began = time.monotonic()
    code, out, err = await run(*COMMANDS[command], "--config", str(path))

    assert time.monotonic() - began < 20
    assert code == 1, (out, err)
    assert "Traceback" not in out + err
    assert password not in out + err
    assert password.rsplit("@", 1)[-1] not in out + err  # no tail past an inner @ either
    if command == "check-config-online":  # a report on stdout: one line for the broker
        (line,) = [line for line in out.splitlines() if line.startswith("FAILED: NATS: ")]
    else:  # one line on stderr, after serve's log records of its start-up
        lines = [line for line in err.strip().splitlines() if not LOG_RECORD.match(line)]
        assert len(lines) == 1, err
        (line,) = lines
        assert line.startswith("cotal-tasks: ")
    assert "nats_url" in line
    assert "nats://***@127.0.0.1" in line
