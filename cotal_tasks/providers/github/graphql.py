"""GitHub's GraphQL endpoint, contained: what it answers never stops the REST mirror.

GraphQL reads only evidence (links, the reference sweep) and Projects v2 Status. An
answer is one of:

- ``data``: returned (errors beside it leave their aliases null);
- a rate limit, in either of GitHub's wordings (``type: RATE_LIMITED``, or the newer
  ``type: RATE_LIMIT`` with ``code: graphql_rate_limit``): ``RateLimited``, and the poll
  resumes from its checkpoint once the limit resets;
- GitHub's transient "Something went wrong while executing your query" (200, ``data:
  null``): retried with backoff, then ``GraphQLUnavailable``;
- the endpoint not answering as GraphQL at all (404 from a wrong ``graphql_url`` or a
  compatible server without it, 5xx, an outage, a body that is not JSON):
  ``GraphQLUnavailable``; the tracker mirrors the issues without that evidence, marks it
  degraded, and reads their evidence again once GraphQL answers;
- any other error without data (a field this server lacks): ``GraphQLRefused``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cotal_tasks.providers.hosted.boundary import as_dict, as_list, as_str
from cotal_tasks.providers.hosted.decode import body_of
from cotal_tasks.providers.hosted.http import RateLimited, TrackerHttp, TrackerHttpError, backoff

ATTEMPTS = 4  # a transient answer is asked again up to this many times in all
_TRANSIENT = "something went wrong while executing your query"
_RATE_TYPES = frozenset({"RATE_LIMITED", "RATE_LIMIT"})


class GraphQLRefused(TrackerHttpError):
    """The GraphQL endpoint refused a query (a field this server lacks, a permission)."""


class GraphQLUnavailable(TrackerHttpError):
    """The GraphQL endpoint did not answer a query as GraphQL (absent, failing, or a
    transient error that outlasted the retries): evidence is degraded until it does."""


def _code(error: Mapping[str, Any]) -> str | None:
    return as_str(error.get("code")) or as_str(as_dict(error.get("extensions")).get("code"))


def rate_limited(error: Mapping[str, Any]) -> bool:
    """Either of GitHub's wordings of a GraphQL rate limit."""
    return error.get("type") in _RATE_TYPES or _code(error) == "graphql_rate_limit"


def transient(error: Mapping[str, Any]) -> bool:
    message = as_str(error.get("message")) or ""
    return message.casefold().startswith(_TRANSIENT)


async def query(http: TrackerHttp, url: str, document: str, variables: Mapping[str, Any]) -> Any:
    """The ``data`` of a GraphQL answer (see the module's docstring for the rest)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            response = await http.request(
                "POST", url, json={"query": document, "variables": dict(variables)}
            )
            body = as_dict(body_of(response))
        except RateLimited:
            raise
        except TrackerHttpError as exc:
            raise GraphQLUnavailable(
                exc.status, f"GraphQL endpoint: {exc.message}", method="POST", path=url
            ) from exc
        except ValueError as exc:  # not JSON: whatever answers there is not GraphQL
            raise GraphQLUnavailable(
                200, "GraphQL endpoint: the answer is not JSON", method="POST", path=url
            ) from exc
        if body.get("data") is not None:
            return body["data"]
        error = as_dict((as_list(body.get("errors")) or [{}])[0])
        if rate_limited(error):
            reset = response.headers.get("x-ratelimit-reset")
            until = float(reset) if reset and reset.isdigit() else http.clock_s() + 60
            raise RateLimited(until, status=200, method="POST", path=url)
        message = f"GraphQL: {as_str(error.get('message'))}"
        if not transient(error):
            raise GraphQLRefused(200, message, method="POST", path=url)
        if attempt < ATTEMPTS:
            await http.sleep(backoff(attempt))
    raise GraphQLUnavailable(200, f"{message} ({ATTEMPTS} attempts)", method="POST", path=url)
