"""``NotificationCenter``: the blocking client, shaped like ``UNUserNotificationCenter``."""

from __future__ import annotations

import logging
import queue
import ssl
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self, TypeVar

from ._device_api import DeviceOperations, effective
from ._ops import Ops, drive
from ._transport import CallbackSink, Connection, ConnectionOptions, check_device_id
from .errors import ChimeConnectionError, ChimeTimeoutError
from .models import Delivery

T = TypeVar("T")
log = logging.getLogger("chime_client")


class NotificationCenter(DeviceOperations):
    """The notifications of one device, over MQTT 5 to chimed.

    Use it as a context manager (or call :meth:`connect` and :meth:`close`)::

        with NotificationCenter("phone-1", "127.0.0.1", 1883) as center:
            center.add(NotificationRequest("tea", NotificationContent(body="Tea is ready"),
                                           TimeIntervalTrigger(300)))

    Every call waits for chimed's reply at most ``timeout`` seconds (the center's by default) and
    then resends the exact same bytes up to ``retries`` times (chimed applies a command once
    however often it arrives), then raises :class:`ChimeTimeoutError`. Error replies raise
    :class:`ChimeError` with the protocol's ``code``. Calls may come from several threads. The
    operations (``add``, ``pending_notification_requests``, ...) are those of every device
    client: a :class:`~chime_client.Backend`'s ``device(id)`` has them too.

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
        self.device_id = check_device_id(device_id)
        self.timeout = timeout
        self.retries = retries
        self.receive_deliveries = receive_deliveries
        self._options = ConnectionOptions(host, port, topic_prefix, client_id, username, password, tls, keepalive,
                                          session_expiry)
        self._deliveries: queue.Queue[Delivery | None] = queue.Queue()
        self._on_delivery = on_delivery
        self._connection: Connection | None = None

    # Connection

    def connect(self) -> Self:
        """Connects and subscribes; raises :class:`ChimeConnectionError` if that fails or takes
        longer than the center's timeout."""
        if self._connection is not None:
            return self
        sinks = [CallbackSink([self.device_id], self._deliveries.put)] if self.receive_deliveries else []
        connection = Connection(self._options, reply_device=self.device_id, reply_tag="py", sinks=sinks)
        connection.open(self.timeout)
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

    def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        connection = self._connection
        if connection is None:
            raise ChimeConnectionError("the center is not connected: use connect() or a with block")
        wait, again = effective(timeout, retries, self.timeout, self.retries)
        return drive(ops, lambda call: connection.call(self.device_id, call, wait, again))

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
