"""Seat identity and the Cotal token grammars (``endpoint-subjects.ts``, SPEC §13.2).

A seat is a principal ``owner.actor`` plus a lifecycle uid. The principal alone is a
reusable routing alias, never identity: a binding always names the whole triple.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from cotal_tasks.core.errors import ContractError, ErrorCode

OWNER_OR_ACTOR = re.compile(r"^[A-Za-z0-9_]{1,64}$")
LIFECYCLE_UID = re.compile(r"^[a-z0-9]{26,32}$")
INSTANCE_ID = LIFECYCLE_UID
COMMAND_TOKEN = re.compile(r"^[a-z0-9-]{1,32}$")
NONCE = re.compile(r"^[A-Za-z0-9_-]{22,64}$")
ID_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
GENERATION = re.compile(r"^[0-9a-f]{32}$")
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
ENDPOINT_TOKEN_MAX = 64
# A seat's principal ``owner.actor`` in settings (the seat directories of the trackers).
PRINCIPAL_PATTERN = r"^[A-Za-z0-9_]{1,64}\.[A-Za-z0-9_]{1,64}$"
Principal = Annotated[str, Field(pattern=PRINCIPAL_PATTERN)]


@dataclass(frozen=True, slots=True)
class Seat:
    """The caller or target triple, as the broker authenticated it."""

    owner: str
    actor: str
    lifecycleUid: str

    def __post_init__(self) -> None:
        for name, value in (("owner", self.owner), ("actor", self.actor)):
            if not OWNER_OR_ACTOR.fullmatch(value):
                raise ContractError(
                    ErrorCode.BAD_REQUEST,
                    f"seat {name} {value!r} is not a Cotal owner/actor token "
                    "([A-Za-z0-9_], 1 to 64 characters). Use the principal as the broker knows it",
                )
        if not LIFECYCLE_UID.fullmatch(self.lifecycleUid):
            raise ContractError(
                ErrorCode.BAD_REQUEST,
                f"lifecycle uid {self.lifecycleUid!r} is not 26 to 32 characters of [a-z0-9]. "
                "Use the uid from the seat's lifecycle record",
            )

    @property
    def principal(self) -> str:
        return f"{self.owner}.{self.actor}"

    def __str__(self) -> str:
        return f"{self.principal}/{self.lifecycleUid}"

    @classmethod
    def parse(cls, text: str) -> Seat:
        """Parse ``OWNER.ACTOR/UID``, the CLI's spelling of a seat."""
        principal, slash, uid = text.partition("/")
        owner, dot, actor = principal.partition(".")
        if not slash or not dot:
            missing = "'/' before the lifecycle uid" if not slash else "'.' between owner and actor"
            raise ContractError(
                ErrorCode.BAD_REQUEST,
                f"seat {text!r} is not OWNER.ACTOR/LIFECYCLE_UID: it has no {missing}. Give "
                "all three parts",
            )
        return cls(owner, actor, uid)


def endpoint_token(name: str) -> str:
    """The subject token of an endpoint name: DNS-shaped labels joined by ``_``."""
    labels = name.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"endpoint name {name!r} is not dot-separated labels of [a-z0-9-] that neither "
            "start nor end with '-'. Name it so, for example com.acme.tasks",
        )
    token = "_".join(labels)
    if len(token) > ENDPOINT_TOKEN_MAX:
        raise ContractError(
            ErrorCode.BAD_REQUEST,
            f"endpoint name {name!r} makes a {len(token)}-character token. "
            f"Keep it within {ENDPOINT_TOKEN_MAX}",
        )
    return token


def space_token(space: str) -> str:
    """The subject token of a space: every character outside ``[A-Za-z0-9_-]`` becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", space)
