"""Masking: a URL's userinfo is masked whole, up to the last ``@`` of its authority, so a
password that holds an ``@`` leaks no part of itself; what follows the authority (a path
with an ``@``, the next URL of a list, plain text) is left as it was."""

from __future__ import annotations

import pytest

from cotal_tasks.core.masking import mask_credentials


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        # Before: nats://***@ssw0rd-Secret@host (the password's tail printed)
        ("nats://bridge:p@ssw0rd-Secret@host", "nats://***@host"),
        ("nats://bridge:p@ss@w0rd@host:4222", "nats://***@host:4222"),
        ("postgresql://tasks:a@b@db:5432/agents", "postgresql://***@db:5432/agents"),
        ("nats://a:p@1@h1,nats://b:p@2@h2", "nats://***@h1,nats://***@h2"),
        ("nats://user:plain@host", "nats://***@host"),
        ("https://github.com/acme/widgets@main", "https://github.com/acme/widgets@main"),
        ("nats://host:4222 (ask ops@example.com)", "nats://host:4222 (ask ops@example.com)"),
        ("https://gl.example/api?private_token=a@b", "https://gl.example/api?private_token=***"),
    ],
)
def test_any_userinfo_is_masked_up_to_the_last_at(text: str, masked: str) -> None:
    assert mask_credentials(text) == masked


def test_no_character_of_a_password_with_at_signs_survives() -> None:
    password = "p@ssw0rd-Secret@x"
    shown = mask_credentials(f"cannot connect to nats://bridge:{password}@10.0.0.7:4222 (refused)")
    assert shown == "cannot connect to nats://***@10.0.0.7:4222 (refused)"
    assert "ssw0rd" not in shown
    assert "Secret" not in shown
