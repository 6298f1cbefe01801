"""What a Linear token may do: ``viewer`` answers whose token it is (a person's, or an
app user's for an ``actor=app`` token) and ``teams`` which of the configured teams it
reads. Linear says nothing of write permissions short of a write, so a token that reads
every team is taken to write as its user may (a guest's may not)."""

from __future__ import annotations

from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_str, at_path
from cotal_tasks.providers.hosted.http import TrackerHttp
from cotal_tasks.providers.linear import queries
from cotal_tasks.providers.linear.client import LinearClient
from cotal_tasks.providers.linear.config import LinearConfig
from cotal_tasks.providers.provider import Access


async def access(config: LinearConfig, http: TrackerHttp) -> Access:
    data = await LinearClient(http, config.api_url).query(
        queries.VIEWER, {"keys": list(config.sources)}
    )
    viewer = as_dict(data.get("viewer"))
    kind = "the app user" if viewer.get("app") is True else "the user"
    who = f"{kind} {as_str(viewer.get('name')) or '?'}"
    seen = {as_str(as_dict(t).get("key")) for t in as_list(at_path(data, "teams", "nodes"))}
    missing = [key for key in config.sources if key not in seen]
    if missing:
        return Access(
            False,
            f"the token is {who}'s, and it does not read the team(s) {', '.join(missing)}",
            "Add that user (or the app) to the teams in Linear, or remove them from teams",
        )
    return Access(
        None,
        f"the token is {who}'s and reads {', '.join(config.sources)}; Linear says whether it "
        "may write only when it writes",
    )
