"""Linear meters an API key in two budgets, requests and complexity points: two Linear
endpoints (two teams) with one key share both. What one endpoint's answer reports the
other reads, and a pool under the reserve holds the other's sync until its reset (the
fake's clock, moved by the waits: nothing sleeps)."""

from __future__ import annotations

from pathlib import Path

from tests.bridge._support import DictPresence
from tests.providers.linear._support import open_linear
from tests.support.fake_linear import FakeLinear
from tests.support.fake_linear_state import TEAM

OPS = "OPS"


async def test_two_linear_endpoints_with_one_key_share_both_budgets(
    linear: FakeLinear, linear_url: str, tmp_path: Path
) -> None:
    linear.add_team(OPS)
    linear.new_issue("in ENG")
    linear.new_issue("in OPS", team=OPS)
    presence = DictPresence()
    async with (
        open_linear(linear, linear_url, tmp_path / "a", presence=presence) as a,
        open_linear(linear, linear_url, tmp_path / "b", presence=presence, teams=[OPS]) as b,
    ):
        a_time, b_time = a.virtual_time(), b.virtual_time()
        # requests well above the reserve, complexity under it (10 % of 3,000,000)
        linear.set_rate_limit(4000, complexity=200_000, reset_in=120)
        await a.poll()
        seen = {budget.resource: budget for budget in b.hosted.http.rate_budgets.values()}
        assert set(seen) == {"requests", "complexity"}  # before: B had seen nothing
        assert seen["requests"].remaining == linear.requests_left
        assert seen["complexity"].remaining == linear.complexity_left

        await b.poll()  # waits for the complexity budget's reset, then syncs
        assert len(b_time.waits) == 1
        assert 119 <= b_time.waits[0] <= 120
        assert linear.requests_left > 4900  # every request of B's went after the refill
        assert (await b.client.get(f"{OPS}-1"))["title"] == "in OPS"
        assert a_time.waits == []
        assert (await a.client.get(f"{TEAM}-1"))["title"] == "in ENG"
