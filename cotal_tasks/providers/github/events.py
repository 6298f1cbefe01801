"""The repository's issue events feed (``GET /repos/{owner}/{repo}/issues/events``): the
issues commits referenced since the feed was last read, and those an event may have moved
into or out of the endpoint's scope. When a poll reads it is ``cadence``'s to say."""

from __future__ import annotations

from dataclasses import dataclass

from cotal_tasks.providers.github.cadence import wait_of
from cotal_tasks.providers.github.mapping import is_pull_request
from cotal_tasks.providers.hosted.boundary import as_dict, as_int, as_list
from cotal_tasks.providers.hosted.http import TrackerHttp

FEED_PAGE = 100  # events per page of the feed, the most GitHub gives
EVENT_PAGES = 10  # newest pages of the issue events feed read past the last event seen
# Issue events that may move an issue into or out of a scope, which a listing with the
# scope's filters cannot show leaving (a label removed: the issue is no longer listed).
SCOPE_EVENTS = frozenset(
    {
        "labeled",
        "unlabeled",
        "milestoned",
        "demilestoned",
        "assigned",
        "unassigned",
        "issue_type_added",
        "issue_type_changed",
        "issue_type_removed",
    }
)


@dataclass(frozen=True, slots=True)
class EventsRead:
    """What a read of the repository's issue events feed found: the issues a commit
    referenced since the last event seen, those an event may have moved out of a scope,
    the newest event id, the feed's ETag, and the ``X-Poll-Interval`` its answer asked
    (seconds; 0: none)."""

    referenced: frozenset[int] = frozenset()
    newest: int | None = None
    etag: str | None = None
    not_modified: bool = False
    rescoped: frozenset[int] = frozenset()
    wait_s: float = 0.0


async def read(
    http: TrackerHttp, path: str, seen: int | None, etag: str | None, scoped: bool = False
) -> EventsRead:
    """The issues a commit referenced (``referenced`` events: a commit pushed with
    ``#12`` in its message, with or without a pull request) and, when ``scoped``, those
    an event of ``SCOPE_EVENTS`` names, since event ``seen``,
    from ``GET /repos/{owner}/{repo}/issues/events`` (``path``, newest first).

    The first page is asked conditionally with ``etag``: a 304 says no issue event
    happened and is not counted by GitHub's rate limit. Pages are read only until the
    event ``seen`` (at most ``EVENT_PAGES``); without one (the first read) the feed is
    only marked, since an import reads every issue's timeline anyway."""
    headers = {"If-None-Match": etag} if etag else None
    params = {"per_page": FEED_PAGE}
    response = await http.request("GET", path, params=params, headers=headers)
    wait_s = wait_of(response.headers.get("x-poll-interval"))
    if response.status_code == 304:
        return EventsRead(not_modified=True, wait_s=wait_s)
    first_etag = response.headers.get("etag")
    referenced: set[int] = set()
    rescoped: set[int] = set()
    newest = seen
    for page in range(EVENT_PAGES):
        reached = False
        for item in as_list(response.json()):
            event_id = as_int(as_dict(item).get("id"))
            if event_id is None:
                continue
            if seen is not None and event_id <= seen:
                reached = True
                break
            newest = max(newest or 0, event_id)
            issue = as_dict(as_dict(item).get("issue"))
            number = as_int(issue.get("number"))
            if not number or is_pull_request(issue):
                continue
            if item.get("event") == "referenced":
                referenced.add(number)
            elif scoped and item.get("event") in SCOPE_EVENTS:
                rescoped.add(number)
        following = response.links.get("next", {}).get("url")
        if reached or following is None or seen is None or page + 1 == EVENT_PAGES:
            break
        response = await http.request("GET", following)
    if seen is None:  # the first read: a mark, even of an empty feed
        return EventsRead(frozenset(), newest or 0, first_etag, wait_s=wait_s)
    return EventsRead(
        frozenset(referenced), newest, first_etag, rescoped=frozenset(rescoped), wait_s=wait_s
    )
