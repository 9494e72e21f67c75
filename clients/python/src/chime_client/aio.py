"""``AsyncNotificationCenter``: the asyncio client, the same operations as ``NotificationCenter``."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
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


class AsyncNotificationCenter:
    """The notifications of one device, for asyncio: every method of
    :class:`~chime_client.NotificationCenter` as a coroutine, and :meth:`deliveries` as an async
    iterator::

        async with AsyncNotificationCenter("phone-1", "127.0.0.1", 1883) as center:
            await center.add(request)
            async for delivery in center.deliveries():
                ...

    Timeouts, retries and errors are those of ``NotificationCenter``. (The MQTT connection runs
    on paho-mqtt's network thread; results come back to the event loop that connected.)
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
        timeout: float = 10.0,
        retries: int = 0,
    ) -> None:
        self.device_id = device_id
        self.timeout = timeout
        self.retries = retries
        self._options = ConnectionOptions(host, port, topic_prefix, client_id, username, password, tls, keepalive,
                                          session_expiry, receive_deliveries)
        self._deliveries: asyncio.Queue[Delivery | None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connection: Connection | None = None

    # Connection

    async def connect(self) -> Self:
        """Connects and subscribes; raises :class:`ChimeConnectionError` if that fails or takes
        longer than the center's timeout."""
        if self._connection is not None:
            return self
        self._loop = asyncio.get_running_loop()
        if self._deliveries is None:
            self._deliveries = asyncio.Queue()
        connection = Connection(self.device_id, self._options, self._delivered)
        try:
            await asyncio.wait_for(asyncio.wrap_future(connection.start()), self.timeout)
        except TimeoutError:
            await asyncio.to_thread(connection.close)
            raise ChimeConnectionError(f"no connection to {self._options.host}:{self._options.port} "
                                       f"within {self.timeout} s") from None
        except BaseException:
            await asyncio.to_thread(connection.close)
            raise
        self._connection = connection
        return self

    async def close(self) -> None:
        """Disconnects; calls still waiting raise :class:`ChimeConnectionError` and
        :meth:`deliveries` ends."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await asyncio.to_thread(connection.close)
            if self._deliveries is not None:
                self._deliveries.put_nowait(None)

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

    def _delivered(self, delivery: Delivery) -> None:
        """On the network thread: hands the delivery to the event loop."""
        loop, deliveries = self._loop, self._deliveries
        if loop is not None and deliveries is not None and not loop.is_closed():
            loop.call_soon_threadsafe(deliveries.put_nowait, delivery)

    async def _call(self, call: Call, timeout: float | None, retries: int | None) -> dict[str, Any]:
        if self._connection is None:
            raise ChimeConnectionError("the center is not connected: use connect() or async with", op=call.op)
        connection = self._connection
        wait = self.timeout if timeout is None else timeout
        tries = 1 + (self.retries if retries is None else retries)
        pending = connection.prepare(call.op, call.payload)
        reply = asyncio.wrap_future(pending.future)
        try:
            for _ in range(tries):
                connection.send(pending)
                try:
                    return await asyncio.wait_for(asyncio.shield(reply), wait)
                except TimeoutError:
                    continue
            raise ChimeTimeoutError(f"no reply to {call.op} within {wait} s ({tries} tries)", op=call.op,
                                    request_id=pending.request_id)
        finally:
            connection.forget(pending)
            reply.cancel()

    async def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        try:
            call = next(ops)
            while True:
                call = ops.send(await self._call(call, timeout, retries))
        except StopIteration as done:
            return cast(T, done.value)

    # Scheduling

    async def add(self, request: NotificationRequest, *, timeout: float | None = None,
                  retries: int | None = None) -> ScheduledNotification:
        """See :meth:`NotificationCenter.add`."""
        return await self._run(_ops.add(request), timeout, retries)

    async def add_all(self, requests: Sequence[NotificationRequest], *, replacing: Selector | None = None,
                      timeout: float | None = None, retries: int | None = None) -> list[ScheduledNotification]:
        """See :meth:`NotificationCenter.add_all`."""
        return await self._run(_ops.add_all(requests, replacing), timeout, retries)

    async def pending_notification_requests(self, matching: Mapping[str, Any] | None = None, *,
                                            page_size: int = 100, timeout: float | None = None,
                                            retries: int | None = None) -> list[PendingNotification]:
        """See :meth:`NotificationCenter.pending_notification_requests`."""
        return await self._run(_ops.pending(matching, page_size), timeout, retries)

    async def remove_pending(self, identifiers: Selector, *, timeout: float | None = None,
                             retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.remove_pending`."""
        return await self._run(_ops.change("cancel", identifiers), timeout, retries)

    async def remove_matching(self, user_info: Mapping[str, Any], *, timeout: float | None = None,
                              retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.remove_matching`."""
        return await self._run(_ops.change("cancel", Match(user_info)), timeout, retries)

    async def remove_all_pending(self, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.remove_all_pending`."""
        return await self._run(_ops.change("cancel", ALL), timeout, retries)

    async def pause(self, which: Selector, *, timeout: float | None = None,
                    retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.pause`."""
        return await self._run(_ops.change("pause", which), timeout, retries)

    async def resume(self, which: Selector, *, timeout: float | None = None,
                     retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.resume`."""
        return await self._run(_ops.change("resume", which), timeout, retries)

    async def update(self, identifier: str, *, trigger: Trigger | None = None, timeout: float | None = None,
                     retries: int | None = None, **fields: Unpack[UpdateFields]) -> UpdatedNotification:
        """See :meth:`NotificationCenter.update`."""
        return await self._run(_ops.update(identifier, trigger, fields), timeout, retries)

    async def preview(self, target: NotificationRequest | str, *, count: int = 10, start: datetime | None = None,
                      timeout: float | None = None, retries: int | None = None) -> list[datetime]:
        """See :meth:`NotificationCenter.preview`."""
        return await self._run(_ops.preview(target, count, start), timeout, retries)

    async def snooze(self, identifier: str, after: Seconds, *, timeout: float | None = None,
                     retries: int | None = None) -> datetime | None:
        """See :meth:`NotificationCenter.snooze`."""
        return await self._run(_ops.snooze(identifier, after), timeout, retries)

    # The device

    async def device_settings(self, *, timeout: float | None = None, retries: int | None = None) -> DeviceSettings:
        """See :meth:`NotificationCenter.device_settings`."""
        return await self._run(_ops.device({}), timeout, retries)

    async def update_device_settings(self, *, timeout: float | None = None, retries: int | None = None,
                                     **changes: Unpack[DeviceChanges]) -> DeviceSettings:
        """See :meth:`NotificationCenter.update_device_settings`."""
        return await self._run(_ops.device(changes), timeout, retries)

    # Receipts

    async def ack(self, fire_ids: str | Sequence[str], badge: int | Badge | None = None, *,
                  timeout: float | None = None, retries: int | None = None) -> AckResult:
        """See :meth:`NotificationCenter.ack`."""
        return await self._run(_ops.ack(fire_ids, badge), timeout, retries)

    async def inbox(self, *, page_size: int = 100, timeout: float | None = None,
                    retries: int | None = None) -> Inbox:
        """See :meth:`NotificationCenter.inbox`."""
        return await self._run(_ops.inbox(page_size), timeout, retries)

    async def history(self, since: datetime | None = None, limit: int | None = None, *,
                      timeout: float | None = None, retries: int | None = None) -> list[HistoryEntry]:
        """See :meth:`NotificationCenter.history`."""
        return await self._run(_ops.history(since, limit), timeout, retries)

    async def command(self, op: str, payload: Mapping[str, Any], *, timeout: float | None = None,
                      retries: int | None = None) -> dict[str, Any]:
        """See :meth:`NotificationCenter.command`."""
        return await self._run(_ops.command(op, payload), timeout, retries)

    # Deliveries

    async def next_delivery(self, timeout: float | None = None) -> Delivery:
        """The next delivery, waiting at most ``timeout`` seconds (``None``: until one comes);
        raises :class:`ChimeTimeoutError`, or :class:`ChimeConnectionError` once closed."""
        while True:
            if self._deliveries is None:
                raise ChimeConnectionError("the center is not connected")
            try:
                delivery = await asyncio.wait_for(self._deliveries.get(), timeout)
            except TimeoutError:
                raise ChimeTimeoutError(f"no delivery within {timeout} s") from None
            if delivery is not None:
                return delivery
            if self._connection is None:
                self._deliveries.put_nowait(None)
                raise ChimeConnectionError("the center was closed")

    async def deliveries(self, idle_timeout: float | None = None) -> AsyncIterator[Delivery]:
        """The deliveries to the device as they arrive; ends when the center closes or, with
        ``idle_timeout``, when none arrives for that many seconds."""
        while True:
            try:
                delivery = await self.next_delivery(idle_timeout)
            except (ChimeConnectionError, ChimeTimeoutError):
                return
            yield delivery
