"""Judge any ``ai.cotal.tasks`` endpoint against section 6 of the contract.

``run_checks(Context(nc, space, endpoint))`` runs every check through the client (and,
for what the client would never send, hand-written requests on the same connection) and
returns one ``Result`` per check: ``PASS``, ``FAIL`` or ``SKIP`` with what was seen.
``cotal-tasks conformance`` is this runner on the command line, and the project's own
pytest conformance suite calls the same checks, so the two cannot drift.

The runner writes to the board it judges (tasks titled as the checks describe them) and,
when staging, the lifecycle heads and presence cards of the seats it invents.
"""

from cotal_tasks.client.conformance.context import (
    Actor,
    Context,
    Failed,
    Hooks,
    Skipped,
)
from cotal_tasks.client.conformance.runner import (
    BY_NAME,
    CHECKS,
    Check,
    Result,
    run_check,
    run_checks,
    select,
    summary,
)

__all__ = [
    "BY_NAME",
    "CHECKS",
    "Actor",
    "Check",
    "Context",
    "Failed",
    "Hooks",
    "Result",
    "Skipped",
    "run_check",
    "run_checks",
    "select",
    "summary",
]
