"""Every operation once, without I/O: a generator that yields the commands it needs (``Call``)
and receives each one's result, so that the blocking and the asyncio clients, centers and
backends alike, drive the same code (:func:`drive`, :func:`drive_async`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

from ._wire import Seconds, format_datetime, optional_datetime, parse_datetime, seconds, to_json
from .errors import ChimeError, ErrorCode
from .models import (
    TRIGGER_WIRE_NAMES,
    UPDATE_WIRE_NAMES,
    AckResult,
    Badge,
    Delivery,
    DeviceChanges,
    DeviceSettings,
    HistoryEntry,
    Inbox,
    NotificationRequest,
    PendingNotification,
    ScheduledNotification,
    UpdatedNotification,
    UpdateFields,
)
from .triggers import Trigger

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One command: ``P/{deviceId}/cmd/{op}`` with ``payload`` (the requestId is added on sending)."""

    op: str
    payload: dict[str, Any]


Ops = Generator[Call, dict[str, Any], T]


def drive(ops: Ops[T], send: Callable[[Call], dict[str, Any]]) -> T:
    """Runs an operation, carrying out each command it yields with ``send``."""
    try:
        call = next(ops)
        while True:
            call = ops.send(send(call))
    except StopIteration as done:
        return cast(T, done.value)


async def drive_async(ops: Ops[T], send: Callable[[Call], Awaitable[dict[str, Any]]]) -> T:
    """:func:`drive` for asyncio."""
    try:
        call = next(ops)
        while True:
            call = ops.send(await send(call))
    except StopIteration as done:
        return cast(T, done.value)


@dataclass(frozen=True)
class Match:
    """Selects the notifications whose ``userInfo`` has every given key with an equal value:
    ``Match({"kind": "med"})``."""

    user_info: Mapping[str, Any]


class AllPending:
    """Selects every notification of the device; use the constant ``ALL``."""

    def __repr__(self) -> str:
        return "ALL"


ALL = AllPending()

Selector = str | Sequence[str] | Match | AllPending
"""Which notifications: an id, a list of ids, ``Match({...})`` or ``ALL``."""


def selector(which: Selector) -> dict[str, Any]:
    if isinstance(which, AllPending):
        return {"all": True}
    if isinstance(which, Match):
        return {"match": {"userInfo": to_json(which.user_info)}}
    ids = [which] if isinstance(which, str) else list(which)
    if not ids:
        raise ValueError("name at least one identifier (or use ALL)")
    return {"ids": ids}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _device_zone(triggers: Sequence[Trigger | None]) -> Generator[Call, dict[str, Any], str | None]:
    """The device's zone, asked of chimed only when a trigger needs it."""
    if any(t is not None and t.needs_device_zone for t in triggers):
        device = yield Call("device", {})
        zone = device.get("timeZone")
        return zone if isinstance(zone, str) else None
    return None


def _scheduled(entry: Mapping[str, Any]) -> ScheduledNotification:
    return ScheduledNotification(str(entry["id"]), optional_datetime(entry.get("nextFireDate")))


def add(request: NotificationRequest) -> Ops[ScheduledNotification]:
    zone = yield from _device_zone([request.trigger])
    result = yield Call("schedule", request.wire(_now(), zone))
    if result.get("duplicate"):
        return ScheduledNotification(request.identifier, None)
    return _scheduled(result["scheduled"][0])


def add_all(requests: Sequence[NotificationRequest], replacing: Selector | None) -> Ops[list[ScheduledNotification]]:
    zone = yield from _device_zone([r.trigger for r in requests])
    now = _now()
    payload: dict[str, Any] = {"notifications": [r.wire(now, zone) for r in requests]}
    if replacing is not None:
        payload["replace"] = selector(replacing)
    result = yield Call("schedule", payload)
    if result.get("duplicate"):
        return [ScheduledNotification(r.identifier, None) for r in requests]
    return [_scheduled(entry) for entry in result["scheduled"]]


#: chimed's largest ``--max-pending-per-device`` (Sources/ChimeProtocol/PageTrail.swift; a test
#: keeps the two equal).
MAX_PENDING_PER_DEVICE = 100_000
#: chimed's largest ``--max-inbox-per-device``.
MAX_INBOX_PER_DEVICE = 100_000
#: The most pages of ``list`` and of ``inbox`` a worker can send: a page holds at least one row
#: (PROTOCOL.md 3.8), so one a row of the largest device, and a last one.
MAX_LIST_PAGES = MAX_PENDING_PER_DEVICE + 1
MAX_INBOX_PAGES = MAX_INBOX_PER_DEVICE + 1


class _PageTrail:
    """The cursors a pager followed. chimed's cursors are opaque, but each page moves past at least
    one row: a cursor that comes back, or more pages than the largest device can fill, means the
    listing would never end, and raises :class:`ChimeError` ``invalid_reply`` instead of looping."""

    def __init__(self, op: str, max_pages: int) -> None:
        self.op = op
        self.max_pages = max_pages
        self.pages = 0
        self.seen: set[str] = set()

    def follow(self, cursor: Any) -> str | None:
        """The cursor to ask for next, None after the last page."""
        self.pages += 1
        if cursor is None:
            return None
        if not isinstance(cursor, str):
            raise ChimeError(ErrorCode.INVALID_REPLY, f"{self.op} page {self.pages} has a cursor that is not a "
                             "string", op=self.op)
        if cursor in self.seen:
            raise ChimeError(ErrorCode.INVALID_REPLY, f"{self.op} page {self.pages} has the cursor of an earlier "
                             "page: the pages would never end", op=self.op)
        if self.pages >= self.max_pages:
            raise ChimeError(ErrorCode.INVALID_REPLY, f"{self.pages} {self.op} pages and a cursor for more, more "
                             "than a device can fill: the pages would never end", op=self.op)
        self.seen.add(cursor)
        return cursor


def pending(matching: Mapping[str, Any] | None, page_size: int) -> Ops[list[PendingNotification]]:
    rows: list[PendingNotification] = []
    trail = _PageTrail("list", MAX_LIST_PAGES)
    cursor: str | None = None
    while True:
        payload: dict[str, Any] = {"limit": page_size}
        if matching is not None:
            payload["match"] = {"userInfo": to_json(matching)}
        if cursor is not None:
            payload["cursor"] = cursor
        result = yield Call("list", payload)
        rows.extend(PendingNotification.from_wire(n) for n in result["notifications"])
        cursor = trail.follow(result.get("cursor"))
        if cursor is None:
            return rows


def change(op: str, which: Selector) -> Ops[list[str]]:
    """``cancel``, ``pause`` or ``resume``: the ids it changed (empty after a duplicate)."""
    result = yield Call(op, selector(which))
    key = {"cancel": "cancelled", "pause": "paused", "resume": "resumed"}[op]
    return [str(i) for i in result.get(key, [])]


def update(identifier: str, trigger: Trigger | None, fields: UpdateFields) -> Ops[UpdatedNotification]:
    payload: dict[str, Any] = {"id": identifier}
    if trigger is not None:
        zone = yield from _device_zone([trigger])
        when = trigger.wire(_now(), zone)
        payload.update({name: None for name in TRIGGER_WIRE_NAMES})
        payload.update(when)
    for name, value in fields.items():
        wire_name = UPDATE_WIRE_NAMES.get(name)
        if wire_name is None:
            raise TypeError(f"update() got an unexpected field {name!r}")
        payload[wire_name] = Badge.to_wire(value) if name == "badge" and value is not None else to_json(value)
    result = yield Call("update", payload)
    updated = result.get("updated")
    if not isinstance(updated, dict):
        return UpdatedNotification(identifier, None)
    return UpdatedNotification(str(updated.get("id", identifier)), optional_datetime(updated.get("nextFireDate")))


def preview(target: NotificationRequest | str, count: int, start: datetime | None) -> Ops[list[datetime]]:
    payload: dict[str, Any] = {"count": count}
    if isinstance(target, str):
        payload["id"] = target
    else:
        zone = yield from _device_zone([target.trigger])
        payload["notification"] = target.wire(start or _now(), zone)
    if start is not None:
        if start.tzinfo is None:
            raise ValueError("preview start must be an aware datetime (an absolute instant)")
        payload["from"] = format_datetime(start)
    result = yield Call("preview", payload)
    return [parse_datetime(d) for d in result["fireDates"]]


def snooze(identifier: str, after: Seconds) -> Ops[datetime | None]:
    result = yield Call("snooze", {"id": identifier, "after": seconds(after)})
    return optional_datetime(result.get("nextFireDate"))


def device(changes: DeviceChanges) -> Ops[DeviceSettings]:
    names = {"time_zone": "timeZone", "badge": "badge", "quiet_hours": "quietHours", "receipts": "receipts",
             "history": "history", "push": "push", "add_push": "addPush", "remove_push": "removePush"}
    payload: dict[str, Any] = {}
    for name, value in changes.items():
        if name not in names:
            raise TypeError(f"update_device_settings() got an unexpected field {name!r}")
        payload[names[name]] = Badge.to_wire(value) if name == "badge" and value is not None else to_json(value)
    result = yield Call("device", payload)
    if result.get("duplicate"):
        result = yield Call("device", {})
    return DeviceSettings.from_wire(result)


def ack(fire_ids: str | Sequence[str], badge: int | Badge | None) -> Ops[AckResult]:
    payload: dict[str, Any] = {"fireIds": [fire_ids] if isinstance(fire_ids, str) else list(fire_ids)}
    if badge is not None:
        payload["badge"] = Badge.to_wire(badge)
    result = yield Call("ack", payload)
    return AckResult(int(result.get("acknowledged", 0)), [str(i) for i in result.get("unknown", [])])


def inbox(page_size: int) -> Ops[Inbox]:
    deliveries: list[Delivery] = []
    trail = _PageTrail("inbox", MAX_INBOX_PAGES)
    cursor: str | None = None
    while True:
        payload: dict[str, Any] = {"limit": page_size}
        if cursor is not None:
            payload["cursor"] = cursor
        result = yield Call("inbox", payload)
        deliveries.extend(Delivery.from_wire(d) for d in result["deliveries"])
        cursor = trail.follow(result.get("cursor"))
        if cursor is None:
            return Inbox(deliveries, int(result.get("dropped", 0)))


def history(since: datetime | None, limit: int | None) -> Ops[list[HistoryEntry]]:
    payload: dict[str, Any] = {}
    if since is not None:
        if since.tzinfo is None:
            raise ValueError("history since must be an aware datetime (an absolute instant)")
        payload["since"] = format_datetime(since)
    if limit is not None:
        payload["limit"] = limit
    result = yield Call("history", payload)
    return [HistoryEntry.from_wire(d) for d in result["deliveries"]]


def command(op: str, payload: Mapping[str, Any]) -> Ops[dict[str, Any]]:
    result = yield Call(op, dict(payload))
    return result
