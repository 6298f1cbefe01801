"""Settings of a GitHub endpoint (``[endpoints.github]``) and its default status rules."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cotal_tasks.providers.hosted.config import HostedConfig, StatusRule


def github_default_rules() -> tuple[StatusRule, ...]:
    return (
        StatusRule(status="dropped", state="closed", state_reasons=("not_planned", "duplicate")),
        StatusRule(status="done", state="closed"),
        StatusRule(status="blocked", state="open", label="blocked"),
        StatusRule(status="blocked", state="open", project_status="Blocked"),
        StatusRule(status="claimed", state="open", label="in-progress"),
        StatusRule(status="claimed", state="open", project_status="In Progress"),
        StatusRule(status="open", state="open"),
    )


class GitHubConfig(HostedConfig):
    """``[endpoints.github]``: the repository and how its issues map."""

    provider: Literal["github"] = "github"
    repository: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")]
    api_url: str = "https://api.github.com"
    token_env: str = "GITHUB_TOKEN"
    status_rules: tuple[StatusRule, ...] = Field(default_factory=github_default_rules)
    # Read each issue's Projects v2 "Status" (GraphQL, one request per page of issues) so
    # project_status rules can match. Off by default: it costs a request per page.
    project_status: bool = False
    graphql_url: str | None = None  # default: derived from api_url

    def graphql_endpoint(self) -> str:
        if self.graphql_url is not None:
            return self.graphql_url
        base = self.api_url.rstrip("/")
        if base.endswith("/api/v3"):  # GitHub Enterprise Server
            return base.removesuffix("/v3") + "/graphql"
        return base + "/graphql"
