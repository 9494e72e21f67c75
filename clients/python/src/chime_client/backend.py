"""Backends: one MQTT connection under a backend account serving any number of devices
(PROTOCOL.md sections 1 and 4). :class:`AsyncBackend` for asyncio, and :class:`Backend`, the same
for blocking code, which runs an ``AsyncBackend`` on an event loop thread of its own."""

from __future__ import annotations

import asyncio
import logging
import queue
import ssl
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Coroutine, Iterable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Self, TypeVar, cast

from . import _ops
from ._device_api import AsyncDeviceOperations, DeviceOperations, effective
from ._ops import Ops, Selector, drive_async
from ._transport import CallbackSink, Connection, ConnectionOptions, check_device_id
from .errors import ChimeConnectionError, ChimeError, ChimeTimeoutError, ErrorCode
from .models import Delivery, NotificationRequest, ScheduledNotification

T = TypeVar("T")
log = logging.getLogger("chime_client")

#: Commands a backend has in flight (sent, not yet answered) by default.
DEFAULT_WINDOW = 256
#: The largest window: mosquitto's default ``max_queued_messages``, the most QoS 1 messages it
#: queues for one client (chimed's commands, a backend's replies) before it drops them.
MAX_WINDOW = 1000
#: The most notifications one ``schedule`` command carries (PROTOCOL.md section 3.1).
MAX_BATCH = 1000
#: Deliveries a stream holds for its reader by default; past its ``max_queued`` it drops them
#: and counts them in ``dropped``.
DEFAULT_MAX_QUEUED = 10_000

Requests = Sequence[NotificationRequest] | Callable[[str], Sequence[NotificationRequest]]
"""What :meth:`Backend.schedule_many` sends: the same requests to every device, or a function
giving each device's."""


@dataclass(frozen=True)
class DeviceResult(Generic[T]):
    """What one device of a fan-out got: ``value`` when its command succeeded, else ``error``
    (a :class:`ChimeError` from chimed or the transport, or the ``ValueError`` of a request that
    could not be built)."""

    device_id: str
    value: T | None = None
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        """Whether the device's command succeeded."""
        return self.error is None

    def result(self) -> T:
        """The value, or raises the error."""
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def _check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"window: expected an integer from 1 to {MAX_WINDOW}, got {window!r}")
    return window


def _check_batch(requests: Sequence[NotificationRequest]) -> Sequence[NotificationRequest]:
    if not 1 <= len(requests) <= MAX_BATCH:
        raise ValueError(f"a schedule carries 1 to {MAX_BATCH} requests, got {len(requests)}")
    return requests


def _distinct(device_ids: Iterable[str]) -> list[str]:
    ids = list(device_ids)
    seen: set[str] = set()
    for device_id in ids:
        if device_id in seen:
            raise ValueError(f"device {device_id!r} is named twice")
        seen.add(device_id)
    return ids


# Delivery streams


def _ids_of(device_ids: Iterable[str]) -> Collection[str]:
    ids = [device_ids] if isinstance(device_ids, str) else list(device_ids)
    if not ids:
        raise ValueError("name at least one device (or None for every device)")
    return ids


class _Stream(ABC):
    """What both delivery streams share: the sink the connection hands their deliveries to, and
    the bound: at most ``max_queued`` deliveries wait for the reader; past that the newest are
    dropped and counted (a reader that falls that far behind loses them: use receipts,
    PROTOCOL.md section 3.9, for deliveries that must not be lost)."""

    def __init__(self, connection: Connection, device_ids: Iterable[str] | None, idle_timeout: float | None,
                 max_queued: int, subscribe_timeout: float) -> None:
        if isinstance(max_queued, bool) or not isinstance(max_queued, int) or max_queued < 1:
            raise ValueError(f"max_queued: expected an integer >= 1, got {max_queued!r}")
        self._sink = CallbackSink(None if device_ids is None else _ids_of(device_ids), self._push, self._end)
        #: Seconds without a delivery after which iteration ends (``None``: never).
        self.idle_timeout = idle_timeout
        #: The most deliveries that wait for the reader.
        self.max_queued = max_queued
        self._connection = connection
        self._subscribe_timeout = subscribe_timeout
        self._count_lock = threading.Lock()
        self._queued = 0
        self._dropped = 0
        self._overflowing = False
        self._opened = False
        self._closed = False

    @property
    def device_ids(self) -> frozenset[str] | None:
        """The devices whose deliveries these are; ``None``: every device."""
        return self._sink.device_ids

    @property
    def dropped(self) -> int:
        """Deliveries dropped because ``max_queued`` were waiting to be read."""
        return self._dropped

    def _push(self, delivery: Delivery) -> None:
        """On the network thread: a delivery for the reader, if it fits."""
        if self._admit():
            self._enqueue(delivery)

    def _end(self) -> None:
        """On the network thread: the connection closed."""
        self._enqueue(None)

    @abstractmethod
    def _enqueue(self, delivery: Delivery | None) -> None:
        """On the network thread: hands the delivery, or ``None`` for the end, to the reader."""

    def _admit(self) -> bool:
        """On the network thread: whether a delivery fits."""
        with self._count_lock:
            if self._queued < self.max_queued:
                self._queued += 1
                return True
            self._dropped += 1
            overflow, self._overflowing = not self._overflowing, True
        if overflow:
            log.warning("chime_client: a delivery stream holds %d unread deliveries; dropping new ones until it "
                        "is read (%d dropped so far)", self.max_queued, self._dropped)
        return False

    def _taken(self) -> None:
        with self._count_lock:
            self._queued -= 1
            self._overflowing = False

    def _check_open(self) -> bool:
        """Whether the stream still needs subscribing; raises once it is closed."""
        if self._closed:
            raise ChimeConnectionError("the delivery stream is closed")
        return not self._opened


class DeliveryStream(_Stream):
    """The deliveries to a set of devices, or to every device, as they arrive (blocking).

    Iterate it, or call :meth:`next`. The stream is subscribed when :meth:`Backend.deliveries`
    returns it: nothing published after that is missed unless the reader falls ``max_queued``
    behind (see :attr:`dropped`). Iteration ends, and the stream closes, when the backend closes,
    :meth:`close` is called or ``idle_timeout`` seconds pass without a delivery. Delivery is at
    least once: deduplicate by ``fire_id``.
    """

    def __init__(self, connection: Connection, device_ids: Iterable[str] | None, idle_timeout: float | None,
                 max_queued: int, subscribe_timeout: float) -> None:
        super().__init__(connection, device_ids, idle_timeout, max_queued, subscribe_timeout)
        self._queue: queue.Queue[Delivery | None] = queue.Queue()

    def open(self) -> Self:
        """Subscribes (once), waiting for the broker's grant."""
        if self._check_open():
            self._opened = True
            try:
                self._connection.add_sink(self._sink).result(self._subscribe_timeout)
            except BaseException as error:
                self.close()
                if isinstance(error, FutureTimeout):
                    raise ChimeConnectionError(f"the broker did not grant the subscriptions within "
                                               f"{self._subscribe_timeout} s") from None
                raise
        return self

    def _enqueue(self, delivery: Delivery | None) -> None:
        self._queue.put(delivery)

    def next(self, timeout: float | None = None) -> Delivery:
        """The next delivery, waiting at most ``timeout`` seconds (``None``: until one comes);
        raises :class:`ChimeTimeoutError`, or :class:`ChimeConnectionError` once closed."""
        if not self._closed:
            self.open()
        try:
            delivery = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise ChimeTimeoutError(f"no delivery within {timeout} s") from None
        if delivery is None:
            self._queue.put(None)
            raise ChimeConnectionError("the delivery stream is closed")
        self._taken()
        return delivery

    def close(self) -> None:
        """Unsubscribes; iteration ends once what was received is read."""
        if not self._closed:
            self._closed = True
            self._connection.remove_sink(self._sink)
            self._queue.put(None)

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Delivery:
        try:
            return self.next(self.idle_timeout)
        except (ChimeConnectionError, ChimeTimeoutError):
            self.close()
            raise StopIteration from None

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


class AsyncDeliveryStream(_Stream):
    """:class:`DeliveryStream` for asyncio: ``async with backend.deliveries(ids) as stream:
    async for delivery in stream: ...``. It subscribes on ``async with`` or :meth:`open` (or on
    the first delivery asked for); deliveries published before that are not in it."""

    def __init__(self, connection: Connection, device_ids: Iterable[str] | None, idle_timeout: float | None,
                 max_queued: int, subscribe_timeout: float) -> None:
        super().__init__(connection, device_ids, idle_timeout, max_queued, subscribe_timeout)
        self._queue: asyncio.Queue[Delivery | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def open(self) -> Self:
        """Subscribes (once), waiting for the broker's grant."""
        if self._check_open():
            self._opened = True
            self._loop = asyncio.get_running_loop()
            try:
                await asyncio.wait_for(asyncio.wrap_future(self._connection.add_sink(self._sink)),
                                       self._subscribe_timeout)
            except BaseException as error:
                await self.close()
                if isinstance(error, TimeoutError):
                    raise ChimeConnectionError(f"the broker did not grant the subscriptions within "
                                               f"{self._subscribe_timeout} s") from None
                raise
        return self

    def _enqueue(self, delivery: Delivery | None) -> None:
        """From the network thread: hands the delivery (or the end) to the event loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._queue.put_nowait, delivery)
            except RuntimeError:  # the loop closed meanwhile
                pass


    async def next(self, timeout: float | None = None) -> Delivery:
        """See :meth:`DeliveryStream.next`."""
        if not self._closed:
            await self.open()
        try:
            delivery = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            raise ChimeTimeoutError(f"no delivery within {timeout} s") from None
        if delivery is None:
            self._queue.put_nowait(None)
            raise ChimeConnectionError("the delivery stream is closed")
        self._taken()
        return delivery

    async def close(self) -> None:
        """See :meth:`DeliveryStream.close`."""
        if not self._closed:
            self._closed = True
            self._connection.remove_sink(self._sink)
            self._queue.put_nowait(None)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Delivery:
        try:
            return await self.next(self.idle_timeout)
        except (ChimeConnectionError, ChimeTimeoutError):
            await self.close()
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()


# The asyncio backend


class AsyncBackendDevice(AsyncDeviceOperations):
    """One device as a backend commands it: every operation of
    :class:`~chime_client.AsyncNotificationCenter` (the replies come back to the backend's one
    subscription), and :meth:`deliveries`."""

    def __init__(self, backend: AsyncBackend, device_id: str) -> None:
        self.device_id = check_device_id(device_id)
        self._backend = backend

    async def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        return await self._backend._run(self.device_id, ops, timeout, retries)

    def deliveries(self, idle_timeout: float | None = None, *,
                   max_queued: int = DEFAULT_MAX_QUEUED) -> AsyncDeliveryStream:
        """This device's deliveries: :meth:`AsyncBackend.deliveries` for it alone."""
        return self._backend.deliveries([self.device_id], idle_timeout=idle_timeout, max_queued=max_queued)

    def __repr__(self) -> str:
        return f"AsyncBackendDevice({self.device_id!r})"


class AsyncBackend:
    """One MQTT connection, under a backend account (PROTOCOL.md section 1: it may write
    ``P/+/cmd/#`` and read ``P/+/replies/#``), serving any number of devices::

        async with AsyncBackend("127.0.0.1", 1883, username="backend", password="...") as backend:
            await backend.device("phone-1").add(request)
            results = await backend.schedule_many(device_ids, [campaign])

    A command to device ``D`` asks for its reply on ``P/D/replies/bk-{random}``; the backend
    subscribes once to ``P/+/replies/bk-{random}`` and matches each reply to its command by MQTT 5
    Correlation Data. At most ``window`` commands (default :data:`DEFAULT_WINDOW`, at most
    :data:`MAX_WINDOW`) are in flight at once over all devices: a call past that awaits a free
    place, in order. Timeouts, retries (the same bytes again) and errors are those of
    ``AsyncNotificationCenter``; waiting for a place in the window does not count against the
    timeout.
    """

    def __init__(
        self,
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
        window: int = DEFAULT_WINDOW,
        timeout: float = 10.0,
        retries: int = 0,
    ) -> None:
        self._window = _check_window(window)
        self.timeout = timeout
        self.retries = retries
        self._options = ConnectionOptions(host, port, topic_prefix, client_id, username, password, tls, keepalive,
                                          session_expiry)
        self._connection: Connection | None = None
        self._slots: asyncio.Semaphore | None = None
        self._in_flight = 0

    @property
    def window(self) -> int:
        """The most commands in flight at once."""
        return self._window

    @property
    def in_flight(self) -> int:
        """Commands sent and not yet answered (or given up)."""
        return self._in_flight

    # Connection

    async def connect(self) -> Self:
        """Connects and subscribes to the replies; raises :class:`ChimeConnectionError` if that
        fails or takes longer than the backend's timeout."""
        if self._connection is not None:
            return self
        connection = Connection(self._options, reply_device=None, reply_tag="bk")
        await connection.open_async(self.timeout)
        self._slots = asyncio.Semaphore(self._window)
        self._connection = connection
        return self

    async def close(self) -> None:
        """Disconnects; calls still waiting raise :class:`ChimeConnectionError` and delivery
        streams end."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await asyncio.to_thread(connection.close)

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.close()

    def _require_connection(self) -> Connection:
        if self._connection is None:
            raise ChimeConnectionError("the backend is not connected: use connect() or a with block")
        return self._connection

    # Commands

    def device(self, device_id: str) -> AsyncBackendDevice:
        """A handle on one device (cheap: make one per call if you like); raises
        :class:`ValueError` for an id PROTOCOL.md section 1 refuses."""
        return AsyncBackendDevice(self, device_id)

    async def _run(self, device_id: str, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        wait, again = effective(timeout, retries, self.timeout, self.retries)

        async def send(call: _ops.Call) -> dict[str, Any]:
            connection = self._require_connection()
            assert self._slots is not None  # set with the connection
            async with self._slots:
                self._in_flight += 1
                try:
                    return await connection.call_async(device_id, call, wait, again)
                finally:
                    self._in_flight -= 1

        return await drive_async(ops, send)

    async def schedule_many(self, device_ids: Iterable[str], requests: Requests, *,
                            replacing: Selector | None = None, timeout: float | None = None,
                            retries: int | None = None) -> dict[str, DeviceResult[list[ScheduledNotification]]]:
        """Schedules a campaign on many devices: one atomic ``schedule`` batch of ``requests``
        (1 to :data:`MAX_BATCH`; or ``requests(device_id)``, each device's own) per device,
        first removing what ``replacing`` selects, as ``add_all`` does. Keeps the window full and
        returns, for every device in the order given, its :class:`DeviceResult`: one device's
        error (an invalid id, ``quota_exceeded``, a timeout) does not stop the others. Raises
        :class:`ValueError` when a device is named twice or the batch is empty or too long.

        The results are held until all are in: for millions of devices, call it for a slice of
        them at a time (tens of thousands each)."""
        if callable(requests):
            make = requests
        else:
            fixed = _check_batch(requests)
            make = lambda _device_id: fixed

        def ops(device_id: str) -> Ops[list[ScheduledNotification]]:
            return _ops.add_all(_check_batch(make(device_id)), replacing)

        return await self._fan_out(device_ids, ops, timeout, retries)

    async def _fan_out(self, device_ids: Iterable[str], ops: Callable[[str], Ops[T]], timeout: float | None,
                       retries: int | None) -> dict[str, DeviceResult[T]]:
        """Runs ``ops(device)`` for every device, as many at once as keep the window full."""
        ids = _distinct(device_ids)
        results: dict[str, DeviceResult[T]] = {}
        todo = iter(ids)

        async def worker() -> None:
            for device_id in todo:
                results[device_id] = await self._outcome(device_id, ops, timeout, retries)

        await asyncio.gather(*(worker() for _ in range(min(self._window, len(ids)))))
        return {device_id: results[device_id] for device_id in ids}

    async def _outcome(self, device_id: str, ops: Callable[[str], Ops[T]], timeout: float | None,
                       retries: int | None) -> DeviceResult[T]:
        try:
            check_device_id(device_id)
        except ValueError as error:
            return DeviceResult(device_id, error=ChimeError(ErrorCode.INVALID_ARGUMENT, str(error), field="deviceId"))
        try:
            return DeviceResult(device_id, value=await self._run(device_id, ops(device_id), timeout, retries))
        except Exception as error:  # each device's error is its own result
            return DeviceResult(device_id, error=error)

    # Deliveries

    def deliveries(self, device_ids: Iterable[str] | None = None, *, idle_timeout: float | None = None,
                   max_queued: int = DEFAULT_MAX_QUEUED) -> AsyncDeliveryStream:
        """The deliveries to these devices (``P/{id}/notifications`` each), or with ``None`` to
        every device (``P/+/notifications``, which the backend's account must be allowed to
        read), as an :class:`AsyncDeliveryStream`. Streams may overlap (every device and some, or
        two sets): each gets each of its deliveries once, the broker's copies told apart by MQTT 5
        subscription identifiers."""
        return AsyncDeliveryStream(self._require_connection(), device_ids, idle_timeout, max_queued, self.timeout)


# The blocking backend


async def _finish_calls(timeout: float) -> None:
    """On the loop of a closing :class:`Backend`: lets the calls still running there end (each
    raises :class:`ChimeConnectionError` now that the connection is closed), so that no caller
    waits for a loop that stopped; one that takes longer than ``timeout`` is cancelled."""
    calls = asyncio.all_tasks() - {cast(asyncio.Task[Any], asyncio.current_task())}
    if calls:
        _, late = await asyncio.wait(calls, timeout=timeout)
        for call in late:
            call.cancel()
        await asyncio.gather(*late, return_exceptions=True)


class BackendDevice(DeviceOperations):
    """One device as a backend commands it: every operation of
    :class:`~chime_client.NotificationCenter`, and :meth:`deliveries`."""

    def __init__(self, backend: Backend, device_id: str) -> None:
        self.device_id = check_device_id(device_id)
        self._backend = backend

    def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        backend = self._backend
        return backend._submit(backend._backend._run(self.device_id, ops, timeout, retries))

    def deliveries(self, idle_timeout: float | None = None, *, max_queued: int = DEFAULT_MAX_QUEUED) -> DeliveryStream:
        """This device's deliveries: :meth:`Backend.deliveries` for it alone."""
        return self._backend.deliveries([self.device_id], idle_timeout=idle_timeout, max_queued=max_queued)

    def __repr__(self) -> str:
        return f"BackendDevice({self.device_id!r})"


class Backend:
    """:class:`AsyncBackend` for blocking code::

        with Backend("127.0.0.1", 1883, username="backend", password="...") as backend:
            backend.device("phone-1").add(request)
            results = backend.schedule_many(device_ids, [campaign])
            with backend.deliveries(["phone-1", "phone-2"]) as stream:
                for delivery in stream:
                    ...

    The commands run on an event loop on a thread of the backend's; calls may come from any
    number of threads, and one whose command finds the window full waits for a free place.
    """

    def __init__(
        self,
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
        window: int = DEFAULT_WINDOW,
        timeout: float = 10.0,
        retries: int = 0,
    ) -> None:
        self._backend = AsyncBackend(host, port, topic_prefix=topic_prefix, client_id=client_id, username=username,
                                     password=password, tls=tls, keepalive=keepalive, session_expiry=session_expiry,
                                     window=window, timeout=timeout, retries=retries)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def window(self) -> int:
        """The most commands in flight at once."""
        return self._backend.window

    @property
    def in_flight(self) -> int:
        """Commands sent and not yet answered (or given up)."""
        return self._backend.in_flight

    @property
    def timeout(self) -> float:
        """Seconds each try of a call waits for its reply, unless the call says otherwise."""
        return self._backend.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self._backend.timeout = value

    @property
    def retries(self) -> int:
        """How often a call resends its command, unless the call says otherwise."""
        return self._backend.retries

    @retries.setter
    def retries(self, value: int) -> None:
        self._backend.retries = value

    # Connection

    def connect(self) -> Self:
        """Connects and subscribes to the replies; raises :class:`ChimeConnectionError` if that
        fails or takes longer than the backend's timeout."""
        if self._loop is not None:
            return self
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="chime-backend", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._submit(self._backend.connect())
        except BaseException:
            self._stop_loop()
            raise
        return self

    def close(self) -> None:
        """Disconnects; calls still waiting raise :class:`ChimeConnectionError` and delivery
        streams end."""
        if self._loop is not None:
            try:
                self._submit(self._backend.close())
                self._submit(_finish_calls(self._backend.timeout))
            finally:
                self._stop_loop()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs a coroutine of the async backend on its loop and waits for it."""
        loop = self._loop
        if loop is None:
            coroutine.close()
            raise ChimeConnectionError("the backend is not connected: use connect() or a with block")
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    # Commands

    def device(self, device_id: str) -> BackendDevice:
        """A handle on one device (cheap: make one per call if you like); raises
        :class:`ValueError` for an id PROTOCOL.md section 1 refuses."""
        return BackendDevice(self, device_id)

    def schedule_many(self, device_ids: Iterable[str], requests: Requests, *, replacing: Selector | None = None,
                      timeout: float | None = None,
                      retries: int | None = None) -> dict[str, DeviceResult[list[ScheduledNotification]]]:
        """See :meth:`AsyncBackend.schedule_many`."""
        return self._submit(self._backend.schedule_many(device_ids, requests, replacing=replacing, timeout=timeout,
                                                        retries=retries))

    # Deliveries

    def deliveries(self, device_ids: Iterable[str] | None = None, *, idle_timeout: float | None = None,
                   max_queued: int = DEFAULT_MAX_QUEUED) -> DeliveryStream:
        """The deliveries to these devices, or with ``None`` to every device, as a
        :class:`DeliveryStream`, subscribed when this returns (see :meth:`AsyncBackend.deliveries`)."""
        if self._loop is None:
            raise ChimeConnectionError("the backend is not connected: use connect() or a with block")
        stream = DeliveryStream(self._backend._require_connection(), device_ids, idle_timeout, max_queued,
                                self._backend.timeout)
        return stream.open()
