"""``NotificationCenter``: the blocking client, shaped like ``UNUserNotificationCenter``."""

from __future__ import annotations

import logging
import queue
import ssl
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack, cast

from . import _ops
from ._ops import ALL, Call, Match, Ops, Selector
from ._transport import Connection, ConnectionOptions
from ._wire import Seconds
from .errors import ChimeConnectionError, ChimeTimeoutError
from .models import (
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
log = logging.getLogger("chime_client")


class NotificationCenter:
    """The notifications of one device, over MQTT 5 to chimed.

    Use it as a context manager (or call :meth:`connect` and :meth:`close`)::

        with NotificationCenter("phone-1", "127.0.0.1", 1883) as center:
            center.add(NotificationRequest("tea", NotificationContent(body="Tea is ready"),
                                           TimeIntervalTrigger(300)))

    Every call waits for chimed's reply at most ``timeout`` seconds (the center's by default) and
    then resends the exact same bytes up to ``retries`` times (chimed applies a command once
    however often it arrives), then raises :class:`ChimeTimeoutError`. Error replies raise
    :class:`ChimeError` with the protocol's ``code``. Calls may come from several threads.

    Deliveries to the device are queued for :meth:`deliveries` / :meth:`next_delivery`, or, with
    ``on_delivery``, handed to that function instead (on a thread of the center's, one at a time;
    it may call the center).
    """

    def __init__(
        self,
        device_id: str,
        host: str = "127.0.0.1",
        port: int = 1883,
        *,
        topic_prefix: str = "chime",
        client_id: str | None = None,
        username: str | None = None,
        password: str | None = None,
        tls: ssl.SSLContext | None = None,
        keepalive: int = 60,
        session_expiry: int | None = None,
        receive_deliveries: bool = True,
        on_delivery: Callable[[Delivery], None] | None = None,
        timeout: float = 10.0,
        retries: int = 0,
    ) -> None:
        self.device_id = device_id
        self.timeout = timeout
        self.retries = retries
        self._options = ConnectionOptions(host, port, topic_prefix, client_id, username, password, tls, keepalive,
                                          session_expiry, receive_deliveries)
        self._deliveries: queue.Queue[Delivery | None] = queue.Queue()
        self._on_delivery = on_delivery
        self._connection: Connection | None = None

    # Connection

    def connect(self) -> Self:
        """Connects and subscribes; raises :class:`ChimeConnectionError` if that fails or takes
        longer than the center's timeout."""
        if self._connection is not None:
            return self
        connection = Connection(self.device_id, self._options, self._deliveries.put)
        try:
            connection.start().result(self.timeout)
        except FutureTimeout:
            connection.close()
            raise ChimeConnectionError(f"no connection to {self._options.host}:{self._options.port} "
                                       f"within {self.timeout} s") from None
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        if self._on_delivery is not None:
            threading.Thread(target=self._dispatch, args=(self._on_delivery,), name="chime-deliveries",
                             daemon=True).start()
        return self

    def _dispatch(self, handler: Callable[[Delivery], None]) -> None:
        """Calls ``on_delivery`` on a thread of its own, so that it may call the center."""
        for delivery in self.deliveries():
            try:
                handler(delivery)
            except Exception:
                log.exception("chime_client: on_delivery raised")

    def close(self) -> None:
        """Disconnects; calls still waiting raise :class:`ChimeConnectionError` and
        :meth:`deliveries` ends."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self._deliveries.put(None)

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _call(self, call: Call, timeout: float | None, retries: int | None) -> dict[str, Any]:
        if self._connection is None:
            raise ChimeConnectionError("the center is not connected: use connect() or a with block", op=call.op)
        connection = self._connection
        wait = self.timeout if timeout is None else timeout
        tries = 1 + (self.retries if retries is None else retries)
        pending = connection.prepare(call.op, call.payload)
        try:
            for _ in range(tries):
                connection.send(pending)
                try:
                    return pending.future.result(wait)
                except FutureTimeout:
                    continue
            raise ChimeTimeoutError(f"no reply to {call.op} within {wait} s ({tries} tries)", op=call.op,
                                    request_id=pending.request_id)
        finally:
            connection.forget(pending)

    def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        try:
            call = next(ops)
            while True:
                call = ops.send(self._call(call, timeout, retries))
        except StopIteration as done:
            return cast(T, done.value)

    # Scheduling

    def add(self, request: NotificationRequest, *, timeout: float | None = None,
            retries: int | None = None) -> ScheduledNotification:
        """Schedules the request (``add(_:withCompletionHandler:)``); an identifier that is
        pending is replaced. Returns when its first delivery is due."""
        return self._run(_ops.add(request), timeout, retries)

    def add_all(self, requests: Sequence[NotificationRequest], *, replacing: Selector | None = None,
                timeout: float | None = None, retries: int | None = None) -> list[ScheduledNotification]:
        """Schedules up to 1000 requests atomically, first removing what ``replacing`` selects
        (ids, ``Match({...})`` or ``ALL``) in the same step."""
        return self._run(_ops.add_all(requests, replacing), timeout, retries)

    def pending_notification_requests(self, matching: Mapping[str, Any] | None = None, *, page_size: int = 100,
                                      timeout: float | None = None,
                                      retries: int | None = None) -> list[PendingNotification]:
        """Every notification of the device (or those whose userInfo matches), by id, following
        the list's pages."""
        return self._run(_ops.pending(matching, page_size), timeout, retries)

    def remove_pending(self, identifiers: Selector, *, timeout: float | None = None,
                       retries: int | None = None) -> list[str]:
        """``removePendingNotificationRequests(withIdentifiers:)``; returns the ids removed
        (unknown ids are not an error)."""
        return self._run(_ops.change("cancel", identifiers), timeout, retries)

    def remove_matching(self, user_info: Mapping[str, Any], *, timeout: float | None = None,
                        retries: int | None = None) -> list[str]:
        """Removes every notification whose userInfo has these keys and values."""
        return self._run(_ops.change("cancel", Match(user_info)), timeout, retries)

    def remove_all_pending(self, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """``removeAllPendingNotificationRequests()``."""
        return self._run(_ops.change("cancel", ALL), timeout, retries)

    def pause(self, which: Selector, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """Keeps the selected notifications but stops them firing."""
        return self._run(_ops.change("pause", which), timeout, retries)

    def resume(self, which: Selector, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """Re-arms paused notifications from now (a one-shot whose time passed fires at once)."""
        return self._run(_ops.change("resume", which), timeout, retries)

    def update(self, identifier: str, *, trigger: Trigger | None = None, timeout: float | None = None,
               retries: int | None = None, **fields: Unpack[UpdateFields]) -> UpdatedNotification:
        """Changes only the given fields of a pending notification (``None`` clears one); a new
        ``trigger`` replaces its schedule. ``enabled`` and its counters stay unless given.
        An unknown identifier raises ``not_found``."""
        return self._run(_ops.update(identifier, trigger, fields), timeout, retries)

    def preview(self, target: NotificationRequest | str, *, count: int = 10, start: datetime | None = None,
                timeout: float | None = None, retries: int | None = None) -> list[datetime]:
        """The next ``count`` instants a request, or the pending notification with this id,
        would fire at or after ``start`` (default now). Changes nothing."""
        return self._run(_ops.preview(target, count, start), timeout, retries)

    def snooze(self, identifier: str, after: Seconds, *, timeout: float | None = None,
               retries: int | None = None) -> datetime | None:
        """Delivers the notification's content once more ``after`` seconds from now; returns when."""
        return self._run(_ops.snooze(identifier, after), timeout, retries)

    # The device

    def device_settings(self, *, timeout: float | None = None, retries: int | None = None) -> DeviceSettings:
        """The device's zone, badge, quiet hours, pending count, receipts and history."""
        return self._run(_ops.device({}), timeout, retries)

    def update_device_settings(self, *, timeout: float | None = None, retries: int | None = None,
                               **changes: Unpack[DeviceChanges]) -> DeviceSettings:
        """Sets what is given (``time_zone``, ``badge``, ``quiet_hours`` (``None`` clears them),
        ``receipts``, ``history``) and returns the device."""
        return self._run(_ops.device(changes), timeout, retries)

    # Receipts

    def ack(self, fire_ids: str | Sequence[str], badge: int | Badge | None = None, *, timeout: float | None = None,
            retries: int | None = None) -> AckResult:
        """Acknowledges deliveries, taking them out of the inbox; ``badge`` changes the device's
        counter in the same step, once, if any of them was new."""
        return self._run(_ops.ack(fire_ids, badge), timeout, retries)

    def inbox(self, *, page_size: int = 100, timeout: float | None = None, retries: int | None = None) -> Inbox:
        """Every unacknowledged delivery, oldest first, following the inbox's pages."""
        return self._run(_ops.inbox(page_size), timeout, retries)

    def history(self, since: datetime | None = None, limit: int | None = None, *, timeout: float | None = None,
                retries: int | None = None) -> list[HistoryEntry]:
        """Whether each recent delivery reached the device, newest first."""
        return self._run(_ops.history(since, limit), timeout, retries)

    def command(self, op: str, payload: Mapping[str, Any], *, timeout: float | None = None,
                retries: int | None = None) -> dict[str, Any]:
        """Any command of PROTOCOL.md as raw JSON: its ``result`` object."""
        return self._run(_ops.command(op, payload), timeout, retries)

    # Deliveries

    def next_delivery(self, timeout: float | None = None) -> Delivery:
        """The next delivery to the device, waiting at most ``timeout`` seconds (``None``:
        forever); raises :class:`ChimeTimeoutError`, or :class:`ChimeConnectionError` once closed."""
        try:
            delivery = self._deliveries.get(timeout=timeout)
        except queue.Empty:
            raise ChimeTimeoutError(f"no delivery within {timeout} s") from None
        if delivery is None:
            if self._connection is not None:  # a close before the last connect
                return self.next_delivery(timeout)
            self._deliveries.put(None)
            raise ChimeConnectionError("the center was closed")
        return delivery

    def deliveries(self, idle_timeout: float | None = None) -> Iterator[Delivery]:
        """The deliveries to the device as they arrive; ends when the center closes or, with
        ``idle_timeout``, when none arrives for that many seconds."""
        while True:
            try:
                delivery = self._deliveries.get(timeout=idle_timeout)
            except queue.Empty:
                return
            if delivery is None:
                if self._connection is not None:  # a close before the last connect
                    continue
                self._deliveries.put(None)
                return
            yield delivery
