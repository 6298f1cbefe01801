"""Status labels declared once (finding 10): ``claimed_label``/``blocked_label`` change
what write-back writes and what the default rules read alike, and a configured rule set
that cannot read back what write-back writes is refused, by ``check-config`` too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from cotal_tasks.providers.github.config import GitHubConfig
from cotal_tasks.providers.gitlab.config import GitLabConfig
from tests.bridge._support import DictPresence
from tests.providers.github._support import BUILDER, REPO, TOKEN_ENV, open_github, task_id
from tests.providers.github.writeback_support import synced
from tests.support.cli import run_cli
from tests.support.fake_github import FakeGitHub


async def test_a_renamed_blocked_label_is_written_and_read_back(
    fake: FakeGitHub, github_url: str, tmp_path: Path, presence: DictPresence
) -> None:
    """A write of ``on-hold`` read back as ``open`` before: the default rules still
    matched the label ``blocked``."""
    async with open_github(
        fake, github_url, tmp_path / "b", presence=presence, blocked_label="on-hold"
    ) as gh:
        await synced(gh, "Ship the parser")
        await gh.client.claim(BUILDER, task_id(1))
        reply = await gh.client.update(BUILDER, task_id(1), status="blocked")
        assert fake.issue(REPO, 1).labels == ["on-hold"]
        fake.advance(5)
        await gh.poll()
        record = await gh.get(1)
    assert (reply["status"], reply["statusSource"]) == ("blocked", "on-hold")
    assert (record["status"], record["statusSource"]) == ("blocked", "on-hold")


def test_the_gitlab_default_rules_read_the_configured_labels() -> None:
    config = GitLabConfig(project="acme/widgets", claimed_label="doing", dropped_label="wontfix")
    labels = {rule.label for rule in config.status_rules}
    assert {"doing", "wontfix", "workflow::blocked"} <= labels
    assert "workflow::in progress" not in labels


@pytest.mark.parametrize(
    ("model", "settings"),
    [
        (GitHubConfig, {"repository": "a/b", "blocked_label": "on-hold", "status_rules": []}),
        (GitLabConfig, {"project": "a/b", "dropped_label": None}),
    ],
)
def test_rules_that_cannot_read_back_the_writes_are_refused(
    model: type[GitHubConfig] | type[GitLabConfig], settings: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError, match="do not read back what write-back writes"):
        model.model_validate(settings)


async def test_check_config_refuses_rules_that_cannot_read_back_the_writes(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cotal-tasks.toml"
    config.write_text(
        f"""
space = "demo"
data_dir = "{tmp_path / "data"}"

[[endpoints]]
name = "com.acme.github"
provider = "github"

[endpoints.github]
repository = "{REPO}"
token_env = "{TOKEN_ENV}"
blocked_label = "on-hold"
status_rules = [
  {{ status = "dropped", state = "closed", state_reasons = ["not_planned"] }},
  {{ status = "done", state = "closed" }},
  {{ status = "blocked", label = "blocked" }},
  {{ status = "open" }},
]
""",
        encoding="utf-8",
    )

    code, out, err = await run_cli(config, "check-config")

    assert code != 0
    assert "blocked is written as open with label 'on-hold'" in err + out
    assert "Add a rule" in err + out  # the remedy
