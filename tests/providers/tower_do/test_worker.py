"""The board's file work runs where a stop never waits for it: a call that hangs (a
filesystem gone away) is abandoned when its caller is cancelled, the next call is refused
while it still hangs, and the process exits on time. ``asyncio.to_thread`` would leave the
hung call in the default executor, which ``asyncio.run`` and the interpreter's exit wait for."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import pytest

from cotal_tasks.providers.tower_do.worker import FileWorker, StillBusy


async def test_a_result_an_error_and_a_hung_call_abandoned() -> None:
    worker = FileWorker("board.jsonl")
    assert await worker.run(lambda: 42) == 42
    with pytest.raises(OSError, match="gone"):
        await worker.run(lambda: (_ for _ in ()).throw(OSError("gone")))
    hung = threading.Event()
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(worker.run(hung.wait), 0.2)
    assert time.monotonic() - began < 2
    with pytest.raises(StillBusy):  # never a second call beside the hung one
        await worker.run(lambda: 1)
    hung.set()
    for _ in range(100):  # once it returns, the worker takes calls again
        try:
            assert await worker.run(lambda: 2) == 2
            break
        except StillBusy:
            await asyncio.sleep(0.01)
    else:
        pytest.fail("the worker stayed busy after its call returned")


HANGS = """
import asyncio, sys, threading
from cotal_tasks.providers.tower_do.worker import FileWorker
async def main():
    forever = threading.Event()
    run = FileWorker("board").run if sys.argv[1] == "worker" else (
        lambda work: asyncio.to_thread(work))
    try:
        await asyncio.wait_for(run(forever.wait), 0.2)
    except TimeoutError:
        print("abandoned", flush=True)
asyncio.run(main())
"""


def test_a_process_with_a_hung_file_call_still_exits() -> None:
    done = subprocess.run(
        [sys.executable, "-c", HANGS, "worker"], capture_output=True, text=True, timeout=30
    )
    assert (done.returncode, done.stdout) == (0, "abandoned\n"), done.stderr
    with pytest.raises(subprocess.TimeoutExpired):  # what the bridge did before
        subprocess.run([sys.executable, "-c", HANGS, "to_thread"], capture_output=True, timeout=5)
