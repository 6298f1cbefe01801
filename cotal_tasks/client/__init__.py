"""The typed async client of the ``ai.cotal.tasks`` contract.

    async with TasksClient.connect("nats://127.0.0.1:4222", "demo", "com.example.tasks",
                                   seat="local.builder/01hx…") as tasks:
        task = await tasks.claim_task("b-7k2m9q")

It verifies what Cotal's own caller verifies: the contract is read from ``EPC_<space>``
and checked against its digests, every request pins those digests and binds the instance
that answered the describe, and a reply is accepted only from that instance, on the
caller's own rail, echoing the request id and fitting the published output schema.
Every contract error is a ``TasksError`` with ``code``, ``outcome`` and ``message``.
It depends on ``cotal_tasks.core`` and nats only.
"""

from cotal_tasks.client.client import UNCHECKED, TasksClient
from cotal_tasks.client.contract import CommandContract, Service
from cotal_tasks.client.errors import TasksError
from cotal_tasks.client.events import BoardWatch
from cotal_tasks.client.subjects import Responder
from cotal_tasks.client.wire import Answer, new_id
from cotal_tasks.core import (
    BindingRef,
    BoardChanged,
    ErrorCode,
    EvidenceInput,
    Outcome,
    Seat,
    Task,
    TaskBinding,
    TaskEvidence,
    TaskPage,
    TaskStatus,
    TaskSummary,
)
from cotal_tasks.core.commands import Mode

__all__ = [
    "UNCHECKED",
    "Answer",
    "BindingRef",
    "BoardChanged",
    "BoardWatch",
    "CommandContract",
    "ErrorCode",
    "EvidenceInput",
    "Mode",
    "Outcome",
    "Responder",
    "Seat",
    "Service",
    "Task",
    "TaskBinding",
    "TaskEvidence",
    "TaskPage",
    "TaskStatus",
    "TaskSummary",
    "TasksClient",
    "TasksError",
    "new_id",
]
