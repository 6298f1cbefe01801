"""The subset of GitHub's public GraphQL schema the fake GitHub serves, with GitHub's own
type, field, argument and enum names (from the public schema description,
octokit/graphql-schema). A query that asks for anything else fails validation, as on
GitHub."""

from __future__ import annotations

from graphql import build_schema

SDL = """
scalar DateTime
scalar URI
scalar GitObjectID

type Query {
  repository(owner: String!, name: String!, followRenames: Boolean = true): Repository
  node(id: ID!): Node
  nodes(ids: [ID!]!): [Node]!
}

interface Node { id: ID! }

interface RepositoryOwner { login: String! }
type User implements RepositoryOwner { login: String! }
type Organization implements RepositoryOwner { login: String! }

type Repository {
  name: String!
  nameWithOwner: String!
  url: URI!
  owner: RepositoryOwner!
  issue(number: Int!): Issue
  pullRequest(number: Int!): PullRequest
  issues(
    after: String, before: String, first: Int, last: Int, labels: [String!],
    orderBy: IssueOrder, states: [IssueState!]
  ): IssueConnection!
}

enum IssueState { OPEN CLOSED }
enum IssueOrderField { COMMENTS CREATED_AT UPDATED_AT }
enum OrderDirection { ASC DESC }
input IssueOrder { field: IssueOrderField!, direction: OrderDirection! }

type PageInfo {
  hasNextPage: Boolean!
  hasPreviousPage: Boolean!
  startCursor: String
  endCursor: String
}

enum IssueTimelineItemsItemType {
  ASSIGNED_EVENT
  CLOSED_EVENT
  CONNECTED_EVENT
  CROSS_REFERENCED_EVENT
  ISSUE_COMMENT
  LABELED_EVENT
  REFERENCED_EVENT
  REOPENED_EVENT
}

enum IssueStateReason { COMPLETED DUPLICATE NOT_PLANNED REOPENED }

type Issue implements Node {
  id: ID!
  number: Int!
  title: String!
  url: URI!
  updatedAt: DateTime!
  repository: Repository!
  timelineItems(
    after: String, before: String, first: Int, last: Int,
    itemTypes: [IssueTimelineItemsItemType!], since: DateTime, skip: Int
  ): IssueTimelineItemsConnection!
  projectItems(
    after: String, before: String, first: Int, last: Int, includeArchived: Boolean = true
  ): ProjectV2ItemConnection!
}

type ProjectV2Item { fieldValueByName(name: String!): ProjectV2ItemFieldValue }
union ProjectV2ItemFieldValue = ProjectV2ItemFieldSingleSelectValue
type ProjectV2ItemFieldSingleSelectValue { name: String }

type ProjectV2ItemConnection {
  nodes: [ProjectV2Item]
  pageInfo: PageInfo!
  totalCount: Int!
}

type PullRequest {
  number: Int!
  title: String!
  body: String!
  url: URI!
  createdAt: DateTime!
  updatedAt: DateTime!
  headRefName: String!
  headRepository: Repository
  headRepositoryOwner: RepositoryOwner
  isCrossRepository: Boolean!
  repository: Repository!
  mergeCommit: Commit
  closingIssuesReferences(
    after: String, before: String, first: Int, last: Int, userLinkedOnly: Boolean = false
  ): IssueConnection
  comments(after: String, before: String, first: Int, last: Int): IssueCommentConnection!
}

type Commit {
  oid: GitObjectID!
  url: URI!
  repository: Repository!
}

union ReferencedSubject = Issue | PullRequest
union Closer = Commit | PullRequest
union IssueTimelineItems =
  ClosedEvent | ConnectedEvent | CrossReferencedEvent | ReferencedEvent

type CrossReferencedEvent {
  createdAt: DateTime!
  referencedAt: DateTime!
  isCrossRepository: Boolean!
  willCloseTarget: Boolean!
  source: ReferencedSubject!
  target: ReferencedSubject!
  url: URI!
}

type ConnectedEvent {
  createdAt: DateTime!
  isCrossRepository: Boolean!
  source: ReferencedSubject!
  subject: ReferencedSubject!
}

type ReferencedEvent {
  createdAt: DateTime!
  commit: Commit
  commitRepository: Repository!
  isCrossRepository: Boolean!
  isDirectReference: Boolean!
  subject: ReferencedSubject!
}

type ClosedEvent {
  createdAt: DateTime!
  closer: Closer
  stateReason: IssueStateReason
  url: URI!
}

type IssueTimelineItemsConnection {
  nodes: [IssueTimelineItems]
  pageInfo: PageInfo!
  totalCount: Int!
  filteredCount: Int!
}

type IssueConnection {
  nodes: [Issue]
  pageInfo: PageInfo!
  totalCount: Int!
}

type IssueComment {
  body: String!
  createdAt: DateTime!
}

type IssueCommentConnection {
  nodes: [IssueComment]
  pageInfo: PageInfo!
  totalCount: Int!
}
"""

SCHEMA = build_schema(SDL)
