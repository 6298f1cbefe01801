"""What a secret read from the environment must be before it is used, as one rule per kind
of secret, so the process that uses one (``serve``: a tracker's client, a webhook
receiver, the read API's tokens) and the check before it (``check-config``) refuse the
same values with the same words.

A value is refused when it is empty (``export GITHUB_TOKEN=$GH_TOKEN`` with ``GH_TOKEN``
unset sets the variable to nothing), when it starts or ends with whitespace (a token
pasted with a trailing space or read from a file with its newline: the peer would refuse
it, or a signature would never match), and, for a secret others could guess, when it is
shorter than its rule's minimum. A refusal names the variable and the value's length,
never the value.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_SECRET_CHARS = 16  # a signing key or a bearer secret shorter than this is guessable


@dataclass(frozen=True, slots=True)
class SecretRule:
    """One kind of secret: ``what`` it is (for messages), the fewest characters it may
    have (0: any non-empty value), and ``remedy``, what to do with a refused one."""

    what: str
    min_chars: int
    remedy: str

    def refusal(self, variable: str, value: str) -> str | None:
        """Why ``value`` (read from ``variable``) may not be used, or ``None``."""
        if not value:
            return (
                f"{variable} is set but empty, so {self.what} is empty (as `export "
                f"{variable}=$OTHER` leaves it when OTHER is unset). {self.remedy}"
            )
        if value != value.strip():
            return (
                f"the value in {variable} starts or ends with whitespace ({len(value)} "
                f"characters), so {self.what} would be refused. Export it without the spaces "
                "or the newline"
            )
        if len(value) < self.min_chars:
            return (
                f"{self.what} in {variable} is {len(value)} characters, at least "
                f"{self.min_chars}: anyone could guess it. {self.remedy}"
            )
        return None


TRACKER_TOKEN = SecretRule(
    "the tracker token",
    0,
    "Export the token itself (the config names the variable, never the secret)",
)
WEBHOOK_SECRET = SecretRule(
    "the webhook secret",
    MIN_SECRET_CHARS,
    "Set a long random value in the variable and in the tracker's webhook (for example: "
    "openssl rand -hex 32), or unset the variable to take no deliveries",
)
BEARER_SECRET = SecretRule(
    "the read API's bearer secret",
    MIN_SECRET_CHARS,
    "Use a long random value (for example: openssl rand -hex 32)",
)
