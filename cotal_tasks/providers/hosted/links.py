"""A link a tracker keeps on an issue (a Jira remote link, a Linear attachment) as
evidence, when it points at GitHub or GitLab: a pull or merge request is a ``review``
(its URL, which names its repository), a commit a ``commit`` (``owner/repo@sha``: where
it lives), a CI run, job or pipeline a ``run`` (its URL). Any other link says nothing.

Pure.
"""

from __future__ import annotations

import re

from cotal_tasks.providers.hosted.tracker import Evidence

_GITHUB = re.compile(
    r"^https://github\.com/(?P<repo>[\w.-]+/[\w.-]+)/"
    r"(?:(?P<pull>pull)/\d+|commit/(?P<sha>[0-9a-f]{7,40})|actions/runs/\d+(?:/job/\d+)?)/?$"
)
_GITLAB = re.compile(
    r"^https://[\w.-]*gitlab[\w.-]*/(?P<repo>[\w.-]+(?:/[\w.-]+)+)/-/"
    r"(?:(?P<pull>merge_requests)/\d+|commit/(?P<sha>[0-9a-f]{7,40})|pipelines/\d+|jobs/\d+)/?$"
)


def url_evidence(url: str | None, at: int) -> list[Evidence]:
    """The evidence ``url`` is, read at ``at`` (epoch ms); ``[]`` for any other link."""
    if url is None:
        return []
    match = _GITHUB.match(url) or _GITLAB.match(url)
    if match is None:
        return []
    if match.group("pull"):
        return [Evidence("review", url, at)]
    if sha := match.group("sha"):
        return [Evidence("commit", f"{match.group('repo')}@{sha}", at)]
    return [Evidence("run", url, at)]
