"""The typed client end to end: connect as a seat, create a task, claim it, finish it
with evidence, and list the board.

Against `make run` (space demo, endpoint com.example.tasks), from the checkout:

    .venv/bin/python examples/client_example.py --nats "$(cat .cotal-tasks/nats.url)"

Each run is a new session of the seat local.example, so it takes a fresh lifecycle uid.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets

from cotal_tasks.client import EvidenceInput, Seat, TasksClient, TasksError

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def session_seat(principal: str) -> Seat:
    """The seat for this session: the principal plus a fresh lifecycle uid."""
    owner, actor = principal.split(".")
    return Seat(owner, actor, "".join(secrets.choice(ALPHABET) for _ in range(26)))


async def main(nats_url: str, space: str, endpoint: str, principal: str) -> None:
    seat = session_seat(principal)
    async with TasksClient.connect(nats_url, space, endpoint, seat=seat) as tasks:
        service = await tasks.describe()
        print(f"{service.endpoint}: instance {service.instance_id} epoch {service.epoch}")

        task = await tasks.create_task("Try the typed client", brief="From the example.")
        print(f"created {task.taskId}: {task.status}")
        task = await tasks.claim_task(task.taskId)
        assert task.binding is not None
        print(f"claimed by {task.binding.owner}.{task.binding.actor}/{task.binding.lifecycleUid}")
        task = await tasks.update_task(
            task.taskId,
            status="done",
            note="Ran the example.",
            evidence=[EvidenceInput(kind="run", ref="examples/client_example.py")],
        )
        print(f"{task.taskId}: {task.status}, evidence {[e.ref for e in task.evidence]}")

        try:
            await tasks.update_task(task.taskId, status="open")  # type: ignore[arg-type]
        except TasksError as refused:
            print(f"refused as expected: {refused.code.value} ({refused.outcome})")

        async for summary in tasks.iter_tasks(limit=50):
            print(f"  {summary.taskId:<14} {summary.status:<8} {summary.title}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nats", default="nats://127.0.0.1:4222", help="broker URL")
    parser.add_argument("--space", default="demo")
    parser.add_argument("--endpoint", default="com.example.tasks")
    parser.add_argument("--as", dest="principal", default="local.example", help="OWNER.ACTOR")
    options = parser.parse_args()
    asyncio.run(main(options.nats, options.space, options.endpoint, options.principal))
