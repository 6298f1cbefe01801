"""Every GraphQL query the GitHub provider sends validates against GitHub's published
schema (tests/fixtures/github/graphql-schema.graphql.gz, from @octokit/graphql-schema),
and the fake GitHub's schema names only what GitHub's has: the fake cannot accept a query
GitHub would refuse."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from graphql import (
    GraphQLEnumType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    build_schema,
    get_named_type,
    parse,
    validate,
)

from cotal_tasks.providers.github import evidence, sweep
from cotal_tasks.providers.github.client import ISSUE_OF_NODE_QUERY, PROJECT_STATUS_QUERY
from tests.support.fake_github_schema import SCHEMA as FAKE

FIXTURE = Path(__file__).parents[2] / "fixtures" / "github" / "graphql-schema.graphql.gz"


@pytest.fixture(scope="module")
def github() -> GraphQLSchema:
    sdl = gzip.decompress(FIXTURE.read_bytes()).decode("utf-8")
    # GitHub's schema repeats a few enterprise fields and deprecates some interface
    # implementations; graphql-core would refuse the schema itself, not the queries.
    schema = build_schema(sdl, assume_valid_sdl=True)
    schema._validation_errors = []
    return schema


def errors(schema: GraphQLSchema, query: str) -> list[str]:
    return [error.message for error in validate(schema, parse(query))]


def test_the_check_refuses_a_field_github_lacks(github: GraphQLSchema) -> None:
    assert errors(github, sweep.QUERY.replace("totalCount", "totalKount"))


def test_the_reference_sweep_query_validates_against_github(github: GraphQLSchema) -> None:
    assert errors(github, sweep.QUERY) == []


@pytest.mark.parametrize(
    "asks",
    [
        [evidence.Ask(7)],
        [evidence.Ask(8, pull=True)],
        [evidence.Ask(9, before="Y3Vyc29yOnYyOpHOAAAAAQ==")],
        [evidence.Ask(n, pull=n % 2 == 0) for n in range(1, evidence.BATCH + 1)],
    ],
    ids=["issue", "pull", "earlier-page", "full-batch"],
)
def test_the_evidence_queries_validate_against_github(
    github: GraphQLSchema, asks: list[evidence.Ask]
) -> None:
    query, _ = evidence.query(asks)
    assert errors(github, query) == []


def test_the_project_status_query_validates_against_github(github: GraphQLSchema) -> None:
    assert errors(github, PROJECT_STATUS_QUERY) == []


@pytest.mark.parametrize("query", [PROJECT_STATUS_QUERY, ISSUE_OF_NODE_QUERY])
def test_the_node_queries_validate_against_github_and_the_fake(
    github: GraphQLSchema, query: str
) -> None:
    """A project card's issue by node id, and its Projects v2 Status: both schemas."""
    assert (errors(github, query), errors(FAKE, query)) == ([], [])


def _named(schema: GraphQLSchema, name: str) -> GraphQLNamedType:
    found = schema.get_type(name)
    assert found is not None, f"the fake's type {name} is not in GitHub's schema"
    return found


def test_the_fake_names_only_what_github_has(github: GraphQLSchema) -> None:
    for name, fake_type in FAKE.type_map.items():
        if name.startswith("__"):
            continue
        real = _named(github, name)
        if isinstance(fake_type, GraphQLEnumType):
            assert isinstance(real, GraphQLEnumType), name
            assert set(fake_type.values) <= set(real.values), name
            continue
        if not isinstance(fake_type, GraphQLObjectType):
            continue
        assert isinstance(real, GraphQLObjectType), name
        for field_name, field in fake_type.fields.items():
            assert field_name in real.fields, f"{name}.{field_name} is not GitHub's"
            real_field = real.fields[field_name]
            assert get_named_type(field.type).name == get_named_type(real_field.type).name, (
                f"{name}.{field_name}"
            )
            for arg in field.args:
                assert arg in real_field.args, f"{name}.{field_name}({arg}) is not GitHub's"
