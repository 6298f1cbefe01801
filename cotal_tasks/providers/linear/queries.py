"""The GraphQL documents the Linear tracker sends: only the fields the mapping reads.

Linear prices a query by its complexity (about one point an object and a tenth a field,
each connection's children counted ``first`` times), so the connections nested in an
issue ask for few nodes, and a walk's page asks for attachments only where the sync
reads evidence (``$evidence``), and for the project, the cycle and when it closed only
where the scope reads them (``$facts``).
"""

from __future__ import annotations

ISSUE_FIELDS = """
fragment IssueFields on Issue {
  id identifier title description createdAt updatedAt archivedAt trashed
  previousIdentifiers
  state { id name type }
  team { id key }
  assignee { id }
  delegate { id }
  labels(first: 20) { nodes { name } }
  attachments(first: 20) @include(if: $evidence) { nodes { url createdAt updatedAt } }
  project @include(if: $facts) { id name }
  cycle @include(if: $facts) { number isActive }
  completedAt @include(if: $facts)
  canceledAt @include(if: $facts)
}
"""

ISSUES = (
    """
query Issues($filter: IssueFilter, $first: Int, $after: String, $orderBy: PaginationOrderBy,
             $evidence: Boolean!, $facts: Boolean = false, $team: String = "",
             $withTeam: Boolean = false) {
  issues(filter: $filter, first: $first, after: $after, orderBy: $orderBy,
         includeArchived: true) {
    nodes { ...IssueFields }
    pageInfo { hasNextPage endCursor }
  }
  teams(filter: { key: { eq: $team } }, first: 1) @include(if: $withTeam) {
    nodes { id key }
  }
}
"""
    + ISSUE_FIELDS
)

IDENTIFIERS = """
query Open($filter: IssueFilter, $first: Int, $after: String) {
  issues(filter: $filter, first: $first, after: $after) {
    nodes { identifier previousIdentifiers }
    pageInfo { hasNextPage endCursor }
  }
}
"""

ISSUE = (
    """
query Issue($id: String!, $evidence: Boolean!, $facts: Boolean = false) {
  issue(id: $id) { ...IssueFields }
}
"""
    + ISSUE_FIELDS
)

TEAMS = """
query Teams($team: String!) {
  teams(filter: { key: { eq: $team } }, first: 1) { nodes { id key } }
}
"""

# What a write reads before it sends anything: where the issue stands, who holds it,
# its team's workflow states, the labels the write names, whether the account a claim
# gives it to is an agent (an app user: delegated) or a person's (assigned), and for a
# note, whose the token is and the issue's agent sessions (an agent's note is activity).
BEFORE_WRITE = """
query BeforeWrite($id: String!, $labels: [String!], $withLabels: Boolean!,
                  $account: String!, $withAccount: Boolean!, $withNote: Boolean = false) {
  issue(id: $id) {
    id identifier
    state { id name type }
    assignee { id }
    delegate { id }
    labels(first: 50) { nodes { id name } }
    team { id key states(first: 100) { nodes { id name type position } } }
    agentSessions(first: 10) @include(if: $withNote) {
      nodes { id appUser { id } endedAt dismissedAt }
    }
  }
  viewer @include(if: $withNote) { id app }
  issueLabels(filter: { name: { in: $labels } }, first: 50) @include(if: $withLabels) {
    nodes { id name team { id } }
  }
  user(id: $account) @include(if: $withAccount) { id app }
}
"""

# What a created issue needs to stay in the endpoint's scope: the scope's labels, its
# project and its cycle, by id, and whether the scope's account is an agent's.
SCOPE_NEEDS = """
query ScopeNeeds($labels: [String!], $withLabels: Boolean!, $project: String!,
                 $withProject: Boolean!, $team: String!, $number: Float, $withCycle: Boolean!,
                 $active: Boolean!, $account: String!, $withAccount: Boolean!) {
  user(id: $account) @include(if: $withAccount) { id app }
  issueLabels(filter: { name: { in: $labels } }, first: 50) @include(if: $withLabels) {
    nodes { id name team { id } }
  }
  projects(filter: { name: { eqIgnoreCase: $project } }, first: 2) @include(if: $withProject) {
    nodes { id }
  }
  team(id: $team) @include(if: $withCycle) {
    activeCycle @include(if: $active) { id }
    cycles(filter: { number: { eq: $number } }, first: 1) { nodes { id } }
  }
}
"""

UPDATE = """
mutation Update($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success }
}
"""

CREATE = """
mutation Create($input: IssueCreateInput!) {
  issueCreate(input: $input) { success issue { identifier } }
}
"""

COMMENT = """
mutation Comment($input: CommentCreateInput!) {
  commentCreate(input: $input) { success }
}
"""

# An agent's note on its session: a thought while the work goes on, a response when it
# ends it (the content's ``type`` and Markdown ``body``, as Linear's agent API takes them).
ACTIVITY = """
mutation Activity($input: AgentActivityCreateInput!) {
  agentActivityCreate(input: $input) { success }
}
"""

# The write marks an issue's notes carry: its comments, and its agent sessions' thoughts
# and responses.
COMMENTS = """
query Comments($id: String!) {
  issue(id: $id) {
    comments(first: 50, orderBy: createdAt) { nodes { body } }
    agentSessions(first: 10) {
      nodes {
        activities(last: 50) {
          nodes {
            content {
              ... on AgentActivityThoughtContent { body }
              ... on AgentActivityResponseContent { body }
            }
          }
        }
      }
    }
  }
}
"""

VIEWER = """
query Viewer($keys: [String!]) {
  viewer { id name app }
  teams(filter: { key: { in: $keys } }, first: 50) { nodes { id key } }
}
"""
