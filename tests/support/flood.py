"""A hostile NATS publisher: one body, published over and over on fresh request subjects,
over a raw socket that ignores the payload limit the broker announces (nats-py would refuse
to send it) and connects again whenever the broker closes it for a payload violation.

It runs in its own process, so the loop of whoever starts it (a test, a bench) measures the
bridge alone.
"""

from __future__ import annotations

import asyncio
import sys

# argv: host, port, subject prefix (a nonce is appended), count (0: until killed), rate per
# second (0: back to back); stdin: the body
FLOODER = (
    "import secrets, socket, sys, time\n"
    "host, port, prefix, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])\n"
    "rate = float(sys.argv[5])\n"
    "data = sys.stdin.buffer.read()\n"
    "sent = 0\n"
    "start = time.monotonic()\n"
    "def pace():\n"
    "    if rate:\n"
    "        time.sleep(max(0.0, start + sent / rate - time.monotonic()))\n"
    "while count == 0 or sent < count:\n"
    "    pace()\n"
    "    sock = socket.create_connection((host, port))\n"
    "    try:\n"
    "        sock.recv(4096)\n"
    '        sock.sendall(b\'CONNECT {"verbose":false,"pedantic":false}\\r\\n\')\n'
    "        while count == 0 or sent < count:\n"
    "            subject = (prefix + secrets.token_urlsafe(18)).encode()\n"
    "            head = b'PUB ' + subject + b' ' + str(len(data)).encode() + b'\\r\\n'\n"
    "            sock.sendall(head + data + b'\\r\\n')\n"
    "            sent += 1\n"
    "            pace()\n"
    "    except OSError:\n"
    "        sent += 1\n"
    "    finally:\n"
    "        sock.close()\n"
)


async def flood(port: int, prefix: str, body: bytes, count: int = 0, rate: float = 0) -> None:
    """Publish ``body`` ``count`` times (0: until cancelled) on ``prefix`` + a nonce, at
    ``rate`` a second (0: back to back)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FLOODER,
        "127.0.0.1",
        str(port),
        prefix,
        str(count),
        str(rate),
        stdin=asyncio.subprocess.PIPE,
    )
    try:
        await process.communicate(body)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0
