"""Contract artifacts: RFC 8785 canonical bytes, ``sha256:`` digests, manifests and the
``ai.cotal.tasks`` revision 1 cluster document (``reference/cotal-wire.md`` §4).

Every schema is published as two artifacts, its root and a manifest
``{"v":1,"root":"sha256:<root>","members":[]}``; the manifest's digest (the closure
digest) is what a command row's ``inputDigest``/``outputDigest`` carries. The cluster
document is published the same way, and its closure digest is what ``describe`` names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import rfc8785

from cotal_tasks.core.commands import (
    BOARD_CHANGED,
    BOARD_CHANGED_TOPIC,
    CLUSTER_REVISION,
    CLUSTER_URN,
    COMMANDS,
)
from cotal_tasks.core.messages import BoardChanged
from cotal_tasks.core.schema import json_schema

DIGEST_PREFIX = "sha256:"


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of ``value``."""
    return bytes(rfc8785.dumps(value))


def digest(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Artifact:
    """One content-addressed document: its canonical bytes and their digest."""

    data: bytes
    digest: str

    @classmethod
    def of(cls, value: Any) -> Artifact:
        data = canonical_json(value)
        return cls(data, digest(data))

    @property
    def hex(self) -> str:
        return self.digest.removeprefix(DIGEST_PREFIX)


@dataclass(frozen=True, slots=True)
class Closure:
    """A root document and its manifest; ``digest`` is the closure (manifest) digest."""

    root: Artifact
    manifest: Artifact

    @classmethod
    def of(cls, value: Any) -> Closure:
        root = Artifact.of(value)
        return cls(root, Artifact.of(manifest_for(root.digest)))

    @property
    def digest(self) -> str:
        return self.manifest.digest


def manifest_for(root_digest: str) -> dict[str, Any]:
    return {"v": 1, "root": root_digest, "members": []}


@dataclass(frozen=True, slots=True)
class ContractArtifacts:
    """Everything the endpoint publishes and names."""

    cluster: Closure
    document: Mapping[str, Any]
    inputs: Mapping[str, Closure]
    outputs: Mapping[str, Closure]
    event: Closure

    def all(self) -> tuple[Artifact, ...]:
        """Every artifact to publish, each once, schemas before the document naming them."""
        closures = [*self.inputs.values(), *self.outputs.values(), self.event, self.cluster]
        seen: dict[str, Artifact] = {}
        for closure in closures:
            for artifact in (closure.root, closure.manifest):
                seen.setdefault(artifact.digest, artifact)
        return tuple(seen.values())


def cluster_document(
    inputs: Mapping[str, Closure], outputs: Mapping[str, Closure], event: Closure
) -> dict[str, Any]:
    """The ``ai.cotal.tasks`` revision 1 document; ``effect`` is deliberately absent."""
    commands: list[dict[str, Any]] = []
    for spec in COMMANDS.values():
        row: dict[str, Any] = {
            "name": spec.name,
            "class": spec.cls,
            "targeted": spec.targeted,
            "capability": spec.capability,
            "inputDigest": inputs[spec.name].digest,
            "outputDigest": outputs[spec.name].digest,
        }
        if spec.targeted:
            row["modes"] = list(spec.modes)
        commands.append(row)
    return {
        "urn": CLUSTER_URN,
        "revision": CLUSTER_REVISION,
        "attributes": [],
        "events": [
            {"name": BOARD_CHANGED, "topic": BOARD_CHANGED_TOPIC, "dataDigest": event.digest}
        ],
        "commands": commands,
    }


@cache
def contract_artifacts() -> ContractArtifacts:
    """Build (once, on first use) every artifact of the cluster."""
    inputs = {name: Closure.of(json_schema(spec.input)) for name, spec in COMMANDS.items()}
    outputs = {name: Closure.of(json_schema(spec.output)) for name, spec in COMMANDS.items()}
    event = Closure.of(json_schema(BoardChanged))
    document = cluster_document(inputs, outputs, event)
    return ContractArtifacts(Closure.of(document), document, inputs, outputs, event)
