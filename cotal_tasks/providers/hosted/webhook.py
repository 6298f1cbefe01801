"""What the hosted trackers' webhook receivers share: an endpoint's receiver (its secret,
the path its deliveries name, and the port the route talks to), finding the endpoint a
delivery is for, and accepting a verified delivery.

A delivery is authenticated first, on its raw bytes and before anything of it is
decoded (by the tracker's own scheme, in constant time, against every endpoint's secret);
one that no endpoint's secret verifies is 401, with the same answer whether or not this
bridge syncs what it names, and changes nothing. Only a verified body is parsed; one that
does not parse (not JSON, not an object, nested too deep) is 400. A delivery seen before
(by its delivery id) is acknowledged and ignored, before the issues it names are read
from it (a pull request's text can name thousands: a replayed delivery costs none of
that); the ids a receiver recorded lately are remembered in memory too (``Deliveries``),
so a replay of one is answered without a round trip to the mirror. Otherwise it only
wakes the endpoint's sync for the issues it names, on whichever instance leads it
(``hosted.wakes``), and at most ``webhook_max_issues`` of them: a delivery naming more
wakes one poll instead.
Polling stays the source of truth.

Some deliveries name their issues only through the tracker (``Scheme.lookup``): a renamed
label names the label, not the issues carrying it, and an organisation's project card
names its issue by a node id, with no repository at all. The tracker is asked (bounded by
``webhook_max_issues``; past it, or when no listing can find the issues, the next poll
reads every issue again); a delivery with no repository goes to the verified endpoint
whose tracker says the issue is its own, and is refused as one for a repository this
bridge does not sync when none does.

Some deliveries say the source moved beyond the issues they name (``Scheme.moves``: a
GitHub push, which names no issue, may carry commits that reference some): the source's
next poll reads what its tracker otherwise reads on its own cadence (``SyncEngine.moved``).
Only the source the delivery names is told.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cotal_tasks.core import ContractError
from cotal_tasks.providers.board.checkpoints import Checkpoints
from cotal_tasks.providers.hosted import wakes
from cotal_tasks.providers.hosted.boundary import ItemBoundary, Reason
from cotal_tasks.providers.hosted.decode import loads
from cotal_tasks.providers.hosted.sync import SyncEngine
from cotal_tasks.providers.hosted.tracker import Tracker
from cotal_tasks.providers.provider import (
    Looked,
    Receive,
    SourceRefused,
    Webhook,
    WebhookReceiver,
    WebhookReply,
)

log = logging.getLogger(__name__)

NOT_AN_OBJECT = "the body is not a JSON object. Send the tracker's JSON webhook payload"
DELIVERY_KEEP_MS = 3 * 24 * 3600 * 1000  # GitHub redelivers up to three days back
REMEMBERED = 4096  # delivery ids a receiver remembers in memory (``Deliveries``)
UNMAPPABLE: Reason = "webhook-unmappable"
ID_KEY = "webhook-project-id"  # beside the sync checkpoint: the id deliveries carry
Headers = Mapping[str, str]  # a delivery's headers, lower-case names
T = TypeVar("T", bound=Tracker)  # a tracker folder's own tracker


@dataclass
class Deliveries:
    """The delivery ids a receiver took: kept in the mirror for ``DELIVERY_KEEP_MS`` (so
    every instance sharing it sees them), and those this process recorded there lately
    (the latest ``REMEMBERED``) in memory too, so a replayed delivery (a flood's cheapest
    shape to send) is answered without a round trip to the mirror: most of what a replay
    cost. An id in memory is in the mirror, recorded at the time kept beside it, so the
    answer is the mirror's; one forgotten, or recorded by another instance, is asked of
    the mirror."""

    checkpoints: Checkpoints
    clock: Callable[[], int]
    _recorded: OrderedDict[str, int] = field(default_factory=OrderedDict)

    def _recent(self, delivery_id: str, now: int) -> bool:
        at = self._recorded.get(delivery_id)
        return at is not None and now - at < DELIVERY_KEEP_MS

    async def first(
        self, delivery_id: str, saves: Mapping[str, dict[str, Any]] | None = None
    ) -> bool:
        """Record a delivery id, and with a new one ``saves`` (checkpoint values, in the
        same commit); ``False`` when it was taken already."""
        now = self.clock()
        if self._recent(delivery_id, now):
            return False
        first = await self.checkpoints.first_delivery(
            delivery_id, now, DELIVERY_KEEP_MS, saves=saves
        )
        if first:  # recorded now (one recorded before: the mirror knows since when)
            self._recorded[delivery_id] = now
            if len(self._recorded) > REMEMBERED:
                self._recorded.popitem(last=False)
        return first

    def remembers(self, delivery_id: str) -> bool:
        """Whether this process recorded the id lately (memory only: the mirror is not
        asked, so ``False`` says nothing)."""
        return self._recent(delivery_id, self.clock())

    async def taken(self, delivery_id: str) -> bool:
        """Whether a delivery id was taken (nothing is recorded: ``first`` does that)."""
        now = self.clock()
        if self._recent(delivery_id, now):
            return True
        return await self.checkpoints.delivered(delivery_id, now, DELIVERY_KEEP_MS)


@dataclass
class HookTarget:
    """A hosted endpoint's webhook receiver (the ``WebhookReceiver`` port), handed its
    parts: the mirror's checkpoints (delivery ids, the remembered project id), the sync
    it wakes, the item boundary, and what its tracker says of a delivery (``named``,
    ``lookup``, ``known_id``), bound to that tracker by the assembly."""

    name: str
    path: str  # the configured repository or project (a path, or a GitLab numeric id)
    secret: bytes | None
    checkpoints: Checkpoints
    sync: SyncEngine
    boundary: ItemBoundary
    clock: Callable[[], int]
    names: Callable[[str, Mapping[str, Any]], set[int]]  # (event, payload): the tracker's
    looks_up: Callable[[str, Mapping[str, Any]], Awaitable[Looked | None]] | None
    learned_id: Callable[[], int | None]  # the tracker's ``known_id``
    max_issues: int  # a delivery naming more wakes one poll instead (webhook_max_issues)
    route: str  # the route's name, in what the boundary records
    # Where the id its deliveries carry is kept beside the checkpoint: ``ID_KEY`` for an
    # endpoint's first source, one key per further source (they share the mirror).
    id_key: str = ID_KEY
    # A source over many projects (a GitLab group): whether a delivery's project (its
    # stable id, its path) is one of them; ``path`` then names the group, not a project.
    # ``None``: a source of one project (the tracker's ``holds``).
    holds: Callable[[int | None, str | None], bool] | None = None
    deliveries: Deliveries = field(init=False)

    def __post_init__(self) -> None:
        self.deliveries = Deliveries(self.checkpoints, self.clock)

    async def first_delivery(self, delivery_id: str, *, moved: bool = False) -> bool:
        saves = self.sync.moved(delivery_id) if moved else None
        return await self.deliveries.first(delivery_id, saves)

    async def delivered(self, delivery_id: str) -> bool:
        return await self.deliveries.taken(delivery_id)

    def remembers(self, delivery_id: str) -> bool:
        return self.deliveries.remembers(delivery_id)

    async def wake(self, numbers: set[int]) -> None:
        self.sync.wake(numbers)  # this instance's sync, if it leads
        await wakes.send(self.checkpoints, self.sync.key, self.sync.holder, numbers)  # else

    async def reread(self) -> None:
        await self.sync.ask_reread()
        await self.wake(set())

    @property
    def known_id(self) -> int | None:
        return self.learned_id()

    async def remembered_id(self) -> int | None:
        saved = await self.checkpoints.load(self.id_key)
        return saved["id"] if saved and isinstance(saved.get("id"), int) else None

    async def remember_id(self, pid: int) -> None:
        await self.checkpoints.save(self.id_key, {"id": pid}, self.clock())

    def named(self, event: str, payload: Mapping[str, Any]) -> set[int] | None:
        return self.boundary.map(
            f"{self.route} {event or 'hook'} delivery",
            self.names,
            event,
            payload,
            reason=UNMAPPABLE,
        )

    async def lookup(self, event: str, payload: Mapping[str, Any]) -> Looked | None:
        return None if self.looks_up is None else await self.looks_up(event, payload)

    def covers(self, payload: Mapping[str, Any]) -> bool:
        return False  # a source's receiver takes what names its source

    async def rediscover(self) -> None:
        return None


@dataclass
class SetTarget:
    """The receiver of a discovering endpoint itself (``hosted.discovery``): it names no
    source, and takes what a webhook of the organization or App installation says about
    the set (``covers``): such a change discovers the sources again at once, and a
    delivery about a repository the endpoint does not read is ignored. The sources'
    own receivers take what names them."""

    name: str
    secret: bytes | None
    checkpoints: Checkpoints
    clock: Callable[[], int]
    max_issues: int
    about: Callable[[Mapping[str, Any]], bool]  # the tracker's: is it of the set's place
    soon: Callable[[], None]  # discover again now (``Sources.soon``)
    path: str = ""  # matches no delivery's repository or project
    known_id: int | None = None
    holds: Callable[[int | None, str | None], bool] | None = None  # holds none
    deliveries: Deliveries = field(init=False)

    def __post_init__(self) -> None:
        self.deliveries = Deliveries(self.checkpoints, self.clock)

    async def remembered_id(self) -> int | None:
        return None

    async def remember_id(self, pid: int) -> None:
        return None

    def named(self, event: str, payload: Mapping[str, Any]) -> set[int] | None:
        return set()

    async def lookup(self, event: str, payload: Mapping[str, Any]) -> Looked | None:
        return None

    async def first_delivery(self, delivery_id: str, *, moved: bool = False) -> bool:
        return await self.deliveries.first(delivery_id)  # no source of its own moved

    async def delivered(self, delivery_id: str) -> bool:
        return await self.deliveries.taken(delivery_id)

    def remembers(self, delivery_id: str) -> bool:
        return self.deliveries.remembers(delivery_id)

    async def wake(self, numbers: set[int]) -> None:
        self.soon()

    async def reread(self) -> None:
        self.soon()

    def covers(self, payload: Mapping[str, Any]) -> bool:
        return self.about(payload)

    async def rediscover(self) -> None:
        self.soon()


RECEIVED_BEFORE = WebhookReply(200, "delivery already received")


def delivery_key(tracker: str, delivery: str) -> str:
    """A delivery's id as its receiver records it: the route's name, then the id."""
    return f"{tracker}:{delivery}"


def json_object(body: bytes) -> dict[str, Any] | None:
    """The body as a JSON object; ``None`` when it is not one, nested too deep included."""
    try:
        payload = loads(body)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def remembered(
    scheme: Scheme[Any], verified: Sequence[WebhookReceiver], headers: Headers
) -> WebhookReply | None:
    """The answer to a redelivery that an endpoint whose secret verifies it recorded
    lately in this process (``WebhookReceiver.remembers``), for a tracker whose header
    alone names a delivery: given before the body is decoded, most of what a replayed
    delivery (a flood's cheapest shape to send) would cost. ``None``: read on."""
    name = scheme.delivery_header
    delivery = headers.get(name) if name else None
    if delivery and any(ep.remembers(delivery_key(scheme.tracker, delivery)) for ep in verified):
        return RECEIVED_BEFORE
    return None


@dataclass
class Matcher:
    """Finds the endpoint a delivery is for: by the repository's or project's stable id
    first, then by path, then a source over many projects that holds it (a GitLab
    group's). Ids come from the configuration (a GitLab project id), from the tracker
    (``known_id``: GitLab issues carry their project's id), and from earlier verified
    deliveries matched by path, kept beside the mirror; so a repository or project
    renamed after that keeps its deliveries."""

    endpoints: Sequence[WebhookReceiver]
    ids: dict[int, WebhookReceiver] = field(default_factory=dict)
    _loaded: bool = False

    async def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for ep in self.endpoints:
            if ep.path.isdigit() and ep.holds is None:  # a group's id names no project
                self.ids[int(ep.path)] = ep
            try:
                saved = await ep.remembered_id()
            except ContractError:
                continue
            if saved is not None:
                self.ids.setdefault(saved, ep)

    def _by_id(self, pid: int) -> WebhookReceiver | None:
        if pid in self.ids:
            return self.ids[pid]
        for ep in self.endpoints:
            if ep.known_id == pid:
                return ep
        return None

    async def find(
        self, pid: int | None, path: str | None, verifies: Callable[[WebhookReceiver], bool]
    ) -> WebhookReceiver | None:
        await self._load()
        if pid is not None and (found := self._by_id(pid)) is not None:
            return found
        named = [ep for ep in self.endpoints if path and ep.path.lower() == path.lower()]
        if not named:
            # A source over many projects (a GitLab group) that holds this one; an
            # endpoint of the project itself, matched above, comes first.
            return next((ep for ep in self.endpoints if ep.holds and ep.holds(pid, path)), None)
        found = named[0]
        if pid is not None and verifies(found):  # learn the id, so a rename keeps working
            self.ids[pid] = found
            try:
                await found.remember_id(pid)
            except ContractError as exc:
                log.warning("could not keep the project id of %s: %s", found.name, exc.message)
        return found


async def find_verified(
    matcher: Matcher,
    pid: int | None,
    path: str | None,
    verified: Sequence[WebhookReceiver],
    *,
    what: str,
    mismatch: str,
) -> WebhookReceiver | WebhookReply:
    """The endpoint a verified delivery is for (``verified``: the endpoints whose secret
    verifies it); else the refusal (``what`` is a repository or a project; ``mismatch``
    says the signature matches no secret: a delivery signed with one endpoint's secret
    that names another is refused like an unsigned one)."""
    endpoint = await matcher.find(pid, path, lambda ep: ep in verified)
    if endpoint is None:
        return not_synced(what)
    if endpoint not in verified:
        return WebhookReply(401, mismatch)
    return endpoint


def not_synced(what: str) -> WebhookReply:
    return WebhookReply(
        404,
        f"no endpoint of this bridge syncs that {what}. Point the webhook at the "
        f"bridge that syncs it, or add an endpoint for the {what}",
    )


# (tracker, most, event, payload) -> the issues a delivery names, as the tracker reads
# them; past ``most`` (``webhook_max_issues``) it may stop reading: ``most`` + 1 of them
# say the delivery names more than it refreshes.
Named = Callable[[T, int, str, Mapping[str, Any]], set[int]]
# (tracker, most, event, payload) -> what the tracker says the delivery names (asked of
# it); ``None``: nothing of this endpoint (or no lookup for this event).
Lookup = Callable[[T, int, str, Mapping[str, Any]], Awaitable[Looked | None]]


def lookup_failed(tracker: str, exc: SourceRefused) -> WebhookReply:
    return WebhookReply(
        503,
        f"{tracker} did not say which issues the delivery names ({exc}). Redeliver it "
        "once the tracker answers; the poll keeps syncing meanwhile",
    )


async def seen_before(
    endpoint: WebhookReceiver, delivery: str | None, tracker: str, *, moved: bool = False
) -> WebhookReply | None:
    """Record a verified delivery's id with ``endpoint`` (and, with ``moved``, that its
    source moved: one commit): the answer when it has none or was received before (or
    the record cannot be read); ``None``: a first delivery."""
    if not delivery:
        return WebhookReply(
            400,
            "the delivery id header is missing. Send the delivery as the tracker sends it, "
            "with its delivery headers",
        )
    try:
        first = await endpoint.first_delivery(delivery_key(tracker, delivery), moved=moved)
    except ContractError as exc:
        return WebhookReply(503, exc.message)
    return None if first else RECEIVED_BEFORE


async def rediscovered(
    covering: Sequence[WebhookReceiver], delivery: str | None, tracker: str
) -> WebhookReply:
    """A verified delivery saying a discovering endpoint's set of sources changed (a
    repository created, archived or renamed; one added to or removed from an App
    installation): each endpoint it is about discovers its sources again now."""
    if (seen := await seen_before(covering[0], delivery, tracker)) is not None:
        return seen
    for endpoint in covering:
        await endpoint.rediscover()
    return WebhookReply(202, "accepted; the endpoint's sources are discovered again now")


async def accept(
    endpoint: WebhookReceiver,
    delivery: str | None,
    named: Callable[[], set[int] | None],
    tracker: str,
    *,
    reread: bool = False,
    moved: bool = False,
) -> WebhookReply:
    """Deduplicate a verified delivery by its id, then wake the sync for what it names
    (``named()``, asked of a first delivery only: reading the issues a large body names
    is most of what a delivery costs, and a redelivery's were read the first time;
    ``None``: the payload named nothing readable; the poll finds the change;
    ``reread``: the next poll reads every issue again; ``moved``: the source moved beyond
    what it names, and its next poll reads its feed)."""
    if (seen := await seen_before(endpoint, delivery, tracker, moved=moved)) is not None:
        return seen
    numbers = named() or set()
    if reread:
        await endpoint.reread()
        return WebhookReply(
            202,
            f"accepted; more issues than webhook_max_issues ({endpoint.max_issues}) may "
            "have changed: the next poll reads every issue again",
        )
    limit = endpoint.max_issues
    if len(numbers) > limit:
        await endpoint.wake(set())  # one poll, not a refresh per issue named
        return WebhookReply(
            202,
            f"accepted; it names more than webhook_max_issues ({limit}) issues: the next "
            "poll reads what changed",
        )
    if numbers:
        await endpoint.wake(numbers)
    elif moved:
        return WebhookReply(202, "accepted; the next poll reads what the source's events say")
    return WebhookReply(202, f"accepted; {len(numbers)} issue(s) to refresh")


@dataclass(frozen=True)
class Scheme(Generic[T]):
    """A tracker's side of its webhook route: how a delivery is verified, what repository
    or project and which issues it names, and its id. ``receiver`` does the rest the same
    way for every tracker; ``named`` and ``lookup`` are bound to each endpoint's own
    tracker when the endpoint is assembled (``HookTarget``)."""

    tracker: str  # the route's name, and the prefix of the delivery ids kept
    label: str  # the tracker as messages name it ("GitHub")
    what: str  # "repository" or "project": what a delivery names
    mismatch: str  # the refusal of a delivery its endpoint's secret does not verify
    event_header: str
    verify: Callable[[bytes, Headers, bytes], bool]  # (secret, headers, raw body)
    source: Callable[[Mapping[str, Any]], tuple[str | None, int | None]]  # path, stable id
    named: Named[T]
    # A delivery that names no repository or project and asks only for an answer (a
    # GitHub organisation's ping): answered when any endpoint's secret verifies it.
    hello: Callable[[str, Mapping[str, Any]], bool] = lambda event, payload: False
    # Issues only the tracker can name (see the module's description), for deliveries of
    # ``lookup_events`` alone: the route asks nothing of the tracker for any other.
    lookup: Lookup[T] | None = None
    lookup_events: frozenset[str] = frozenset()
    # Deliveries that change where a discovering endpoint's sources are (a repository
    # created or archived, an installation's repositories): discovered again at once.
    rediscover_events: frozenset[str] = frozenset()
    # (tracker, payload) -> whether a delivery is about the place the endpoint over that
    # tracker discovers its sources in (its organization, its App installation).
    about: Callable[[T, Mapping[str, Any]], bool] = lambda tracker, payload: False
    # Events that say the source moved beyond the issues they name (``accept``'s
    # ``moved``): GitHub's ``push``, ``issues`` and ``pull_request``.
    moves: frozenset[str] = frozenset()
    # A delivery's id: the header that alone names it (GitHub, Jira, Linear), so a replay
    # is answered before its body is decoded; or, where the id needs the payload too
    # (GitLab's), ``delivery`` (headers, payload) -> id.
    delivery_header: str | None = None
    delivery: Callable[[Headers, Mapping[str, Any]], str | None] | None = None

    def delivery_of(self, headers: Headers, payload: Mapping[str, Any]) -> str | None:
        """A verified delivery's id (``None``: it carries none)."""
        if self.delivery is not None:
            return self.delivery(headers, payload)
        return headers.get(self.delivery_header) if self.delivery_header else None

    def target(
        self,
        tracker: T,
        *,
        name: str,
        path: str,
        secret: bytes | None,
        checkpoints: Checkpoints,
        sync: SyncEngine,
        boundary: ItemBoundary,
        clock: Callable[[], int],
        max_issues: int,
        id_key: str = ID_KEY,
    ) -> HookTarget:
        """The receiver of one source of an endpoint, over its ``tracker``."""
        lookup = self.lookup

        async def looks_up(event: str, payload: Mapping[str, Any]) -> Looked | None:
            return None if lookup is None else await lookup(tracker, max_issues, event, payload)

        return HookTarget(
            name,
            path,
            secret,
            checkpoints,
            sync,
            boundary,
            clock,
            names=lambda event, payload: self.named(tracker, max_issues, event, payload),
            looks_up=None if lookup is None else looks_up,
            learned_id=lambda: tracker.known_id,
            max_issues=max_issues,
            route=self.tracker,
            id_key=id_key,
            holds=tracker.holds,
        )

    def set_target(
        self,
        tracker: T,
        *,
        name: str,
        secret: bytes | None,
        checkpoints: Checkpoints,
        clock: Callable[[], int],
        max_issues: int,
        soon: Callable[[], None],
    ) -> SetTarget:
        """The receiver of a discovering endpoint itself, over its ``tracker``."""
        return SetTarget(
            name,
            secret,
            checkpoints,
            clock,
            max_issues,
            about=lambda payload: self.about(tracker, payload),
            soon=soon,
        )

    def webhook(self) -> Webhook:
        """The provider's route over its endpoints' receivers."""
        return Webhook(self.tracker, lambda receivers: receiver(self, receivers))


def receiver(scheme: Scheme[Any], receivers: Sequence[WebhookReceiver]) -> Receive:
    """The route's handler over the endpoints' receivers."""
    matcher = Matcher(receivers)

    async def receive(headers: Headers, body: bytes) -> WebhookReply:
        # The raw bytes against every secret (each check is constant-time, and every
        # endpoint is checked), before anything of the body is decoded.
        verified = [
            ep
            for ep in matcher.endpoints
            if ep.secret is not None and scheme.verify(ep.secret, headers, body)
        ]
        if not verified:
            return WebhookReply(401, scheme.mismatch)
        if (replay := remembered(scheme, verified, headers)) is not None:
            return replay
        payload = json_object(body)
        if payload is None:
            return WebhookReply(400, NOT_AN_OBJECT)
        event = headers.get(scheme.event_header, "")
        path, pid = scheme.source(payload)
        if path is None and pid is None and scheme.hello(event, payload):
            return WebhookReply(200, "pong")
        covering = [ep for ep in verified if ep.covers(payload)]
        if covering and event in scheme.rediscover_events:
            delivery = scheme.delivery_of(headers, payload)
            return await rediscovered(covering, delivery, scheme.tracker)
        if path is None and pid is None and event in scheme.lookup_events:
            return await unsourced(scheme, verified, event, headers, payload)
        endpoint = await find_verified(
            matcher, pid, path, verified, what=scheme.what, mismatch=scheme.mismatch
        )
        if isinstance(endpoint, WebhookReply):
            if endpoint.status == 404 and covering:  # an organization's other repository
                return WebhookReply(200, f"ignored; no endpoint here reads that {scheme.what}")
            return endpoint
        if (looked := await ask(scheme, endpoint, event, headers, payload)) is not None:
            return looked
        return await accept(
            endpoint,
            scheme.delivery_of(headers, payload),
            lambda: endpoint.named(event, payload),
            scheme.tracker,
            moved=event in scheme.moves,
        )

    return receive


async def ask(
    scheme: Scheme[Any],
    endpoint: WebhookReceiver,
    event: str,
    headers: Headers,
    payload: Mapping[str, Any],
) -> WebhookReply | None:
    """The answer to a delivery whose issues ``endpoint``'s tracker names (accepted, or
    503 when the tracker did not answer); ``None``: it names none of this endpoint's. A
    delivery the endpoint took already is answered before the tracker is asked."""
    if event not in scheme.lookup_events:
        return None  # nothing to ask: the delivery names its issues itself
    delivery = scheme.delivery_of(headers, payload)
    if delivery:
        try:
            if await endpoint.delivered(delivery_key(scheme.tracker, delivery)):
                return RECEIVED_BEFORE
        except ContractError as exc:
            return WebhookReply(503, exc.message)
    try:
        looked = await endpoint.lookup(event, payload)
    except SourceRefused as exc:
        return lookup_failed(scheme.label, exc)
    if looked is None:
        return None
    numbers = None if looked.numbers is None else set(looked.numbers)
    return await accept(endpoint, delivery, lambda: numbers, scheme.tracker, reread=numbers is None)


async def unsourced(
    scheme: Scheme[Any],
    verified: Sequence[WebhookReceiver],
    event: str,
    headers: Headers,
    payload: Mapping[str, Any],
) -> WebhookReply:
    """A delivery naming no repository or project (an organisation's): the first
    verified endpoint whose tracker finds its issues there takes it; none: refused as a
    delivery for what this bridge does not sync."""
    for endpoint in verified:
        if (answer := await ask(scheme, endpoint, event, headers, payload)) is not None:
            return answer
    return not_synced(scheme.what)
