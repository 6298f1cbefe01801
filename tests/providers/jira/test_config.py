"""``[endpoints.jira]``: what a Jira endpoint's settings take, and refusals that name the
key and the remedy (through the bridge's config loader, as an operator meets them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotal_tasks.bridge.config import load_config
from cotal_tasks.core import ContractError
from cotal_tasks.providers.jira.config import JiraConfig

BASE = """
[[endpoints]]
provider = "jira"
[endpoints.jira]
api_url = "https://acme.atlassian.net"
project = "DEMO"
"""


def load(tmp_path: Path, extra: str, base: str = BASE) -> JiraConfig:
    path = tmp_path / "tasks.toml"
    path.write_text(base + extra, encoding="utf-8")
    settings = load_config(path).endpoints[0].settings
    assert isinstance(settings, JiraConfig)
    return settings


def test_a_basic_auth_endpoint_and_its_defaults(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        'email = "bridge@acme.example"\ntoken_env = "ACME_JIRA"\n'
        'jql = "labels = agents"\nwebhook_secret_env = "ACME_HOOK"\npoll_interval_s = 30\n'
        '[endpoints.jira.seats]\n"712020:0f7e-seat" = "local.builder"\n',
    )
    assert (cfg.auth, cfg.email, cfg.token_env, cfg.jql) == (
        "basic",
        "bridge@acme.example",
        "ACME_JIRA",
        "labels = agents",
    )
    assert cfg.seats == {"712020:0f7e-seat": "local.builder"}
    assert (cfg.poll_interval_s, cfg.webhook_secret_env, cfg.location) == (30, "ACME_HOOK", "DEMO")
    assert [r.status for r in cfg.status_rules] == [
        "dropped",
        "done",
        "blocked",
        "blocked",
        "claimed",
        "open",
    ]


def test_a_bearer_endpoint_needs_no_email(tmp_path: Path) -> None:
    cfg = load(tmp_path, 'auth = "bearer"\ntoken_env = "ACME_OAUTH"\n')
    assert (cfg.auth, cfg.email) == ("bearer", None)


def test_status_rules_read_category_status_name_and_resolutions(tmp_path: Path) -> None:
    cfg = load(
        tmp_path,
        'auth = "bearer"\n[[endpoints.jira.status_rules]]\nstatus = "blocked"\n'
        'status_name = "Waiting for customer"\n[[endpoints.jira.status_rules]]\n'
        'status = "dropped"\ncategory = "done"\nresolutions = ["Obsolete"]\n',
    )
    first, second = cfg.status_rules
    assert first.native_conditions() == {"status": "Waiting for customer"}
    assert second.native_conditions() == {"category": "done"}
    assert second.state_reasons == ("Obsolete",)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param("", 'email is required with auth = "basic"', id="basic without email"),
        pytest.param(
            'auth = "bearer"\nemail = "a@b.c"\n', "email is only used with", id="bearer with email"
        ),
        pytest.param(
            'auth = "bearer"\njql = "labels = x ORDER BY created"\n',
            "jql must not order the issues",
            id="jql with ORDER BY",
        ),
        pytest.param(
            'auth = "bearer"\n[endpoints.jira.seats]\n"alice@acme.example" = "local.builder"\n',
            "seats are keyed by Atlassian accountId",
            id="a seat keyed by email",
        ),
        pytest.param(
            'auth = "bearer"\n[[endpoints.jira.status_rules]]\nstatus = "done"\nstate = "closed"\n',
            "a Jira status rule reads category (new, indeterminate or done), not state",
            id="a rule with the generic state",
        ),
        pytest.param(
            'auth = "bearer"\n[[endpoints.jira.status_rules]]\nstatus = "done"\n'
            'category = "closed"\n',
            "endpoints.0.jira.status_rules.0.category",
            id="an unknown category",
        ),
        pytest.param(
            'auth = "bearer"\nclaimed_label = "in-progress"\n',
            "endpoints.0.jira.claimed_label",
            id="a claim label",
        ),
    ],
)
def test_a_refusal_names_the_key_and_the_remedy(tmp_path: Path, extra: str, expected: str) -> None:
    with pytest.raises(ContractError) as caught:
        load(tmp_path, extra)
    assert expected in caught.value.message
    assert "endpoints.0.jira" in caught.value.message


def test_the_project_key_and_site_are_checked(tmp_path: Path) -> None:
    base = '[[endpoints]]\nprovider = "jira"\n[endpoints.jira]\nauth = "bearer"\n'
    with pytest.raises(ContractError) as caught:
        load(tmp_path, 'api_url = "acme.atlassian.net"\nproject = "demo"\n', base)
    assert "endpoints.0.jira.api_url" in caught.value.message
    assert "endpoints.0.jira.project" in caught.value.message
