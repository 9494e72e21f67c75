"""The asyncio clients: ``AsyncNotificationCenter``, the same operations as ``NotificationCenter``,
and ``AsyncBackend`` (from ``backend``), one connection serving many devices."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self, TypeVar

from ._device_api import AsyncDeviceOperations, effective
from ._ops import Ops, drive_async
from ._transport import CallbackSink, Connection, ConnectionOptions, check_device_id
from .backend import AsyncBackend, AsyncBackendDevice, AsyncDeliveryStream
from .errors import ChimeConnectionError, ChimeTimeoutError
from .models import Delivery

__all__ = ["AsyncBackend", "AsyncBackendDevice", "AsyncDeliveryStream", "AsyncNotificationCenter"]

T = TypeVar("T")


class AsyncNotificationCenter(AsyncDeviceOperations):
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
        self.device_id = check_device_id(device_id)
        self.timeout = timeout
        self.retries = retries
        self.receive_deliveries = receive_deliveries
        self._options = ConnectionOptions(host, port, topic_prefix, client_id, username, password, tls, keepalive,
                                          session_expiry)
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
        sinks = [CallbackSink([self.device_id], self._delivered)] if self.receive_deliveries else []
        connection = Connection(self._options, reply_device=self.device_id, reply_tag="py", sinks=sinks)
        await connection.open_async(self.timeout)
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

    async def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        connection = self._connection
        if connection is None:
            raise ChimeConnectionError("the center is not connected: use connect() or async with")
        wait, again = effective(timeout, retries, self.timeout, self.retries)
        return await drive_async(ops, lambda call: connection.call_async(self.device_id, call, wait, again))

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
