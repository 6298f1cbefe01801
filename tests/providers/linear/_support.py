"""Helpers for the Linear provider tests: a Linear endpoint opened the way the bridge
opens it (``open_linear``) against the fake Linear on loopback."""

from __future__ import annotations

from typing import Any, cast

from cotal_tasks.providers.linear.config import LinearConfig
from tests.conftest import seat
from tests.providers import hosted_support as hosted
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import TEAM, User

ENDPOINT_NAME = "com.acme.linear"
TOKEN_ENV = "COTAL_TASKS_TEST_LINEAR_TOKEN"
SECRET_ENV = "COTAL_TASKS_TEST_LINEAR_WEBHOOK_SECRET"
WEBHOOK_SECRET = "a linear signing secret nobody else knows"

# The seat directory: an agent (an app user, claims delegate to it) and a user account
# are seats; every other account is a person.
BUILDER = seat("builder", 1)  # the agent's seat
REVIEWER = seat("reviewer", 2)  # a user account's seat


class LinearEndpoint(hosted.HostedEndpoint[FakeLinear]):
    async def get(self, number: int) -> dict[str, Any]:
        return await self.client.get(f"{TEAM}-{number}")


def make_fake() -> tuple[FakeLinear, User, User, User]:
    """The fake workspace with an agent, a seat's user account and a person."""
    fake = FakeLinear()
    agent = fake.add_user("builder-agent", app=True)
    reviewer = fake.add_user("reviewer-bot")
    person = fake.add_user("alice")
    return fake, agent, reviewer, person


def linear_config(api_url: str, **overrides: Any) -> LinearConfig:
    settings: dict[str, Any] = {"teams": [TEAM], "token_env": TOKEN_ENV}
    return cast(LinearConfig, hosted.tracker_section(LinearConfig, api_url, settings, overrides))


endpoint_config = hosted.endpoint_maker(ENDPOINT_NAME, linear_config)
open_linear = hosted.endpoint_opener(LinearEndpoint, endpoint_config)
linear_mesh = hosted.mesh_opener(hosted.HostedMesh, linear_config)


def task_id(number: int, team: str = TEAM) -> str:
    return f"{team}-{number}"
