"""The repositories of an organization, or of a GitHub App installation, as an endpoint's
discovered sources (``hosted.discovery``).

``organization = "acme"`` lists ``GET /orgs/acme/repos`` (``type=all``: what the token
can see of the organization); ``installation = true`` lists ``GET
/installation/repositories`` (``{total_count, repositories}``) with the App
installation's token, which cannot use the organization's issue listings, so each
repository is polled on its own as any other source. Both are paged by ``Link``, 100 a
page, at most ``max_pages`` pages. A repository is taken when its name (without the
owner) passes ``include``/``exclude`` (fnmatch, case-insensitive), and, unless
``include_archived``, it is not archived (an archived repository refuses every write:
its issues cannot be worked on); in name order. One that is listed and passed over says
why, which becomes its tasks' ``statusSource`` should it leave. One the listing leaves
out entirely is asked for by name before it leaves (``absent``): a listing paged while
repositories are created or deleted can skip one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cotal_tasks.providers.github.client import PER_PAGE
from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.hosted.boundary import as_dict, as_list
from cotal_tasks.providers.hosted.discovery import Discovery, Found
from cotal_tasks.providers.hosted.http import TrackerHttp, TrackerHttpError
from cotal_tasks.providers.hosted.paging import PageCap

ARCHIVED, UNPICKED, LEFT = "archived", "not in include/exclude", "left the organization"
MOVED = "renamed or moved"


def discovery(config: GitHubConfig, http: TrackerHttp) -> Discovery | None:
    """How ``config``'s repositories are discovered; ``None`` when it lists them."""
    name = config.discovery
    if name is None:
        return None
    if config.installation:
        path, key, gone = "installation/repositories", "repositories", "left the installation"
    else:
        path, key, gone = f"orgs/{config.organization}/repos", None, LEFT

    async def find() -> Found:
        return picked(config, await _listed(http, path, key))

    async def absent(repository: str) -> str | None:
        """Why a repository the listing left out is gone, or ``None``: it is there and
        taken all the same. ``GET /repos/{owner}/{name}``: 404 deleted, hidden, or
        outside the installation (``gone``); 301 renamed or transferred; a 200 says
        whether it is taken; anything else unanswered fails the discovery."""
        try:
            response = await http.request("GET", f"repos/{repository}")
        except TrackerHttpError as exc:
            if exc.status == 301:
                return MOVED
            if exc.status in (403, 404, 410):
                return gone
            raise
        found = picked(config, [as_dict(response.json())])
        if found.paths == (repository,):
            return None
        return next(iter(found.passed_over.values()), gone)

    return Discovery(
        name, find, absent, config.discover_interval_s, gone, retry_s=config.poll_interval_s
    )


async def _listed(http: TrackerHttp, path: str, key: str | None) -> list[dict[str, Any]]:
    """Every repository of the listing (``key``: the list's field in an object answer)."""
    cap = PageCap(http)
    items: list[dict[str, Any]] = []
    url: str | None = path
    params: dict[str, Any] | None = {"per_page": PER_PAGE, **({} if key else {"type": "all"})}
    while url is not None:
        cap.take(path)
        response = await http.request("GET", url, params=params)
        body = response.json()
        page = as_list(as_dict(body).get(key)) if key is not None else as_list(body)
        items += [item for item in page if isinstance(item, dict)]
        url, params = response.links.get("next", {}).get("url"), None
    return items


def picked(config: GitHubConfig, listed: Sequence[Mapping[str, Any]]) -> Found:
    """The repositories ``config`` takes of those ``listed``, and why it passes over the
    others."""
    taken: list[str] = []
    passed_over: dict[str, str] = {}
    for repository in listed:
        full_name, name = repository.get("full_name"), repository.get("name")
        if not isinstance(full_name, str) or "/" not in full_name:
            continue  # no repository the endpoint could read
        name = name if isinstance(name, str) else full_name.split("/", 1)[1]
        owner = full_name.split("/", 1)[0].casefold()
        if config.organization is not None and owner != config.organization.casefold():
            passed_over[full_name] = LEFT  # transferred out, under its old name's answer
        elif not config.picks(name):
            passed_over[full_name] = UNPICKED
        elif repository.get("archived") is True and not config.include_archived:
            passed_over[full_name] = ARCHIVED
        else:
            taken.append(full_name)
    return Found(tuple(sorted(taken, key=str.casefold)), passed_over)
