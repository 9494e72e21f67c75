"""The MQTT 5 connection that centers and backends talk through: paho-mqtt's network thread,
TCP_NODELAY, request/reply correlation (PROTOCOL.md section 4), timeouts and retries, and
deliveries handed to sinks (section 5)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import ssl
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from ._ops import Call
from ._wire import encode
from .errors import ChimeConnectionError, ChimeError, ChimeTimeoutError, ErrorCode
from .models import Delivery

log = logging.getLogger("chime_client")

_DEVICE_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")

#: Topic filters per SUBSCRIBE packet when a stream names many devices.
SUBSCRIBE_BATCH = 100

# MQTT 5 subscription identifiers: a delivery says which subscription it came through, so that
# one that matches both the all-devices filter and a device's own topic (the broker sends a copy
# for each) reaches each stream once.
_ALL_DEVICES_SUBSCRIPTION = 1
_DEVICE_SUBSCRIPTION = 2


def check_device_id(device_id: str) -> str:
    """The device id, or :class:`ValueError` when PROTOCOL.md section 1 refuses it."""
    if not isinstance(device_id, str) or not _DEVICE_ID.fullmatch(device_id):
        raise ValueError(f"a device id is 1 to 128 characters from A-Z a-z 0-9 _ . : @ -, got {device_id!r}")
    return device_id


@dataclass(frozen=True)
class ConnectionOptions:
    host: str = "127.0.0.1"
    port: int = 1883
    topic_prefix: str = "chime"
    client_id: str | None = None
    username: str | None = None
    password: str | None = None
    tls: ssl.SSLContext | None = None
    keepalive: int = 60
    #: Seconds the broker keeps the session (and queues deliveries) while the client is away;
    #: set with a fixed ``client_id`` for a persistent session (``clean_start=false``).
    session_expiry: int | None = None


class PendingCall:
    """One command in flight: its exact bytes and properties (a retry resends them as they
    are) and the future its reply resolves."""

    def __init__(self, device_id: str, op: str, topic: str, payload: bytes, request_id: str,
                 properties: Properties) -> None:
        self.device_id = device_id
        self.op = op
        self.topic = topic
        self.payload = payload
        self.request_id = request_id
        self.properties = properties
        self.future: Future[dict[str, Any]] = Future()


class DeliverySink(ABC):
    """Where a connection hands the deliveries of some devices (``device_ids``) or of every
    device (``None``). :meth:`push` and :meth:`end` run on the network thread and must not block."""

    def __init__(self, device_ids: Collection[str] | None) -> None:
        self.device_ids = None if device_ids is None else frozenset(check_device_id(d) for d in device_ids)

    def topics(self, prefix: str) -> list[str]:
        if self.device_ids is None:
            return [f"{prefix}/+/notifications"]
        return [f"{prefix}/{d}/notifications" for d in sorted(self.device_ids)]

    def wants(self, device_id: str, subscriptions: Sequence[int]) -> bool:
        """Whether a delivery to ``device_id`` that came through these subscription identifiers
        is this sink's (each sink takes the copy of its own kind of subscription)."""
        if self.device_ids is None:
            return not subscriptions or _ALL_DEVICES_SUBSCRIPTION in subscriptions
        return device_id in self.device_ids and (not subscriptions or _DEVICE_SUBSCRIPTION in subscriptions)

    @abstractmethod
    def push(self, delivery: Delivery) -> None:
        """A delivery arrived."""

    @abstractmethod
    def end(self) -> None:
        """The connection closed: no more deliveries."""


class CallbackSink(DeliverySink):
    """Hands every delivery, and the end, to functions (on the network thread)."""

    def __init__(self, device_ids: Collection[str] | None, on_delivery: Callable[[Delivery], None],
                 on_end: Callable[[], None] | None = None) -> None:
        super().__init__(device_ids)
        self._on_delivery = on_delivery
        self._on_end = on_end

    def push(self, delivery: Delivery) -> None:
        self._on_delivery(delivery)

    def end(self) -> None:
        if self._on_end is not None:
            self._on_end()


def _properties(packet_type: int) -> Properties:
    return Properties(packet_type)  # type: ignore[no-untyped-call]  # paho's constructor has no annotations


def _settle(future: Future[Any], *, result: Any = None, error: BaseException | None = None) -> None:
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except InvalidStateError:
        pass


def _all_of(futures: Sequence[Future[None]]) -> Future[None]:
    """A future that resolves when every one of ``futures`` has, failing with the first error."""
    combined: Future[None] = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def done(future: Future[None]) -> None:
        error = future.exception()
        if error is not None:
            _settle(combined, error=error)
            return
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            _settle(combined, result=None)

    if not futures:
        _settle(combined, result=None)
    for future in futures:
        future.add_done_callback(done)
    return combined


def _no_delay(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    """Sends each packet at once: without it a request waits for Nagle's algorithm and the
    broker's delayed ACK, about 40 ms a round trip. Also set for a TLS socket (an ``SSLSocket``
    is a ``socket.socket``)."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Connection:
    """One MQTT 5 connection. Commands go to any device's ``P/{deviceId}/cmd/{op}`` with the
    Response Topic ``P/{deviceId}/replies/{tag}-{random}``; the connection subscribes to that
    suffix for ``reply_device`` only (a device's account may read only its own replies), or for
    every device with ``reply_device=None`` (a backend: ``P/+/replies/bk-...``)."""

    def __init__(self, options: ConnectionOptions, *, reply_device: str | None, reply_tag: str,
                 sinks: Sequence[DeliverySink] = ()) -> None:
        self.options = options
        self.prefix = options.topic_prefix
        self._reply_suffix = f"{reply_tag}-{uuid.uuid4().hex[:16]}"
        scope = "+" if reply_device is None else check_device_id(reply_device)
        self.reply_filter = f"{self.prefix}/{scope}/replies/{self._reply_suffix}"
        self._pending: dict[bytes, PendingCall] = {}
        self._lock = threading.Lock()
        self._closed = False
        # Delivery subscriptions: the sinks, how many want each topic, the SUBSCRIBEs waiting for
        # their SUBACK (by packet id), SUBACKs that came before their packet id was recorded, and
        # the subscriptions asked for while disconnected (granted with the next connect's).
        self._sinks: list[DeliverySink] = list(sinks)
        self._topics: dict[str, int] = {}
        for sink in self._sinks:
            for topic in sink.topics(self.prefix):
                self._topics[topic] = self._topics.get(topic, 0) + 1
        self._subscribing: dict[int, Future[None]] = {}
        self._early_acks: dict[int, list[ReasonCode]] = {}
        self._after_connect: list[Future[None]] = []
        self.ready: Future[None] = Future()
        client_id = options.client_id or f"chime-py-{uuid.uuid4().hex[:16]}"
        self._client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                   protocol=MQTTProtocolVersion.MQTTv5)
        if options.username is not None:
            self._client.username_pw_set(options.username, options.password)
        if options.tls is not None:
            self._client.tls_set_context(options.tls)
        self._client.reconnect_delay_set(1, 30)
        self._client.on_socket_open = _no_delay
        self._client.on_connect = self._connected
        self._client.on_connect_fail = self._connect_failed
        self._client.on_subscribe = self._subscribed
        self._client.on_message = self._message
        self._client.on_disconnect = self._disconnected

    # Lifecycle

    def start(self) -> Future[None]:
        """Connects in the network thread; the future resolves once the reply (and delivery)
        subscriptions are granted."""
        properties = _properties(PacketTypes.CONNECT)
        persistent = bool(self.options.session_expiry)
        if persistent:
            properties.SessionExpiryInterval = self.options.session_expiry
        self._client.connect_async(self.options.host, self.options.port, self.options.keepalive,
                                   clean_start=not persistent, properties=properties)
        self._client.loop_start()
        return self.ready

    def open(self, timeout: float) -> None:
        """:meth:`start` and wait for it, blocking; closes and raises :class:`ChimeConnectionError`
        if that fails or takes longer than ``timeout`` seconds."""
        try:
            self.start().result(timeout)
        except FutureTimeout:
            self.close()
            raise self._no_connection(timeout) from None
        except BaseException:
            self.close()
            raise

    async def open_async(self, timeout: float) -> None:
        """:meth:`open` for asyncio."""
        try:
            await asyncio.wait_for(asyncio.wrap_future(self.start()), timeout)
        except TimeoutError:
            await asyncio.to_thread(self.close)
            raise self._no_connection(timeout) from None
        except BaseException:
            await asyncio.to_thread(self.close)
            raise

    def _no_connection(self, timeout: float) -> ChimeConnectionError:
        return ChimeConnectionError(f"no connection to {self.options.host}:{self.options.port} within {timeout} s")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
            sinks, self._sinks = self._sinks, []
            waiting = [*self._subscribing.values(), *self._after_connect]
        self._client.disconnect()
        self._client.loop_stop()
        closed = ChimeConnectionError("the connection was closed")
        for future in [self.ready, *waiting]:
            _settle(future, error=closed)
        for call in pending:
            _settle(call.future, error=ChimeConnectionError(f"the connection was closed before {call.op} was "
                                                            "answered", op=call.op, request_id=call.request_id))
        for sink in sinks:
            sink.end()

    def socket(self) -> Any:
        """The connected socket (for tests), or None."""
        return self._client.socket()

    # Requests

    def prepare(self, device_id: str, op: str, payload: dict[str, Any]) -> PendingCall:
        request_id = uuid.uuid4().hex
        properties = _properties(PacketTypes.PUBLISH)
        properties.ResponseTopic = f"{self.prefix}/{device_id}/replies/{self._reply_suffix}"
        properties.CorrelationData = request_id.encode()
        properties.ContentType = "application/json"
        call = PendingCall(device_id, op, f"{self.prefix}/{device_id}/cmd/{op}",
                           encode({**payload, "requestId": request_id}), request_id, properties)
        with self._lock:
            if self._closed:
                raise ChimeConnectionError("the connection is closed", op=op)
            self._pending[request_id.encode()] = call
        return call

    def send(self, call: PendingCall) -> None:
        """Publishes the call's bytes (again, for a retry). While the connection is down paho
        queues the message and sends it on reconnect."""
        if self._closed:
            raise ChimeConnectionError("the connection is closed", op=call.op, request_id=call.request_id)
        info = self._client.publish(call.topic, call.payload, qos=1, properties=call.properties)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            raise ChimeConnectionError(f"could not publish {call.op}: {mqtt.error_string(info.rc)}", op=call.op,
                                       request_id=call.request_id)

    def forget(self, call: PendingCall) -> None:
        with self._lock:
            self._pending.pop(call.request_id.encode(), None)

    def call(self, device_id: str, call: Call, timeout: float, retries: int) -> dict[str, Any]:
        """Sends the command and waits for its result, blocking: each try waits ``timeout``
        seconds, then the same bytes go again, ``retries`` times; then :class:`ChimeTimeoutError`."""
        pending = self.prepare(device_id, call.op, call.payload)
        try:
            for _ in range(1 + retries):
                self.send(pending)
                try:
                    return pending.future.result(timeout)
                except FutureTimeout:
                    continue
            raise _timed_out(call, pending, timeout, retries)
        finally:
            self.forget(pending)

    async def call_async(self, device_id: str, call: Call, timeout: float, retries: int) -> dict[str, Any]:
        """:meth:`call` for asyncio."""
        pending = self.prepare(device_id, call.op, call.payload)
        reply = asyncio.wrap_future(pending.future)
        try:
            for _ in range(1 + retries):
                self.send(pending)
                try:
                    return await asyncio.wait_for(asyncio.shield(reply), timeout)
                except TimeoutError:
                    continue
            raise _timed_out(call, pending, timeout, retries)
        finally:
            self.forget(pending)
            reply.cancel()

    # Delivery subscriptions

    def add_sink(self, sink: DeliverySink) -> Future[None]:
        """Starts handing ``sink`` its deliveries; the future resolves once the broker granted
        the subscriptions it needs."""
        with self._lock:
            if self._closed:
                raise ChimeConnectionError("the connection is closed")
            self._sinks.append(sink)
            new = []
            for topic in sink.topics(self.prefix):
                self._topics[topic] = self._topics.get(topic, 0) + 1
                if self._topics[topic] == 1:
                    new.append(topic)
        return _all_of(self._subscribe(new))

    def remove_sink(self, sink: DeliverySink) -> None:
        """Stops handing ``sink`` deliveries and drops the subscriptions no other sink needs."""
        with self._lock:
            if sink not in self._sinks:
                return
            self._sinks.remove(sink)
            unused = []
            for topic in sink.topics(self.prefix):
                self._topics[topic] -= 1
                if self._topics[topic] == 0:
                    del self._topics[topic]
                    unused.append(topic)
        for start in range(0, len(unused), SUBSCRIBE_BATCH):
            self._client.unsubscribe(unused[start:start + SUBSCRIBE_BATCH])

    def _subscribe(self, topics: Sequence[str]) -> list[Future[None]]:
        """SUBSCRIBEs for ``topics``, :data:`SUBSCRIBE_BATCH` at a time, each with the identifier
        of its kind: the futures of their SUBACKs."""
        futures: list[Future[None]] = []
        kinds: dict[int | None, list[str]] = {}
        for topic in topics:
            if topic == self.reply_filter:
                kinds.setdefault(None, []).append(topic)
            elif topic.startswith(f"{self.prefix}/+/"):
                kinds.setdefault(_ALL_DEVICES_SUBSCRIPTION, []).append(topic)
            else:
                kinds.setdefault(_DEVICE_SUBSCRIPTION, []).append(topic)
        for identifier, named in kinds.items():
            properties = None
            if identifier is not None:
                properties = _properties(PacketTypes.SUBSCRIBE)
                properties.SubscriptionIdentifier = identifier
            for start in range(0, len(named), SUBSCRIBE_BATCH):
                future: Future[None] = Future()
                futures.append(future)
                batch = [(t, SubscribeOptions(qos=1)) for t in named[start:start + SUBSCRIBE_BATCH]]
                rc, mid = self._client.subscribe(batch, properties=properties)
                with self._lock:
                    if rc == MQTTErrorCode.MQTT_ERR_NO_CONN or mid is None:
                        self._after_connect.append(future)  # the next connect subscribes to every topic
                        continue
                    early = self._early_acks.pop(mid, None)
                    if early is None:
                        self._subscribing[mid] = future
                if early is not None:
                    self._granted(future, early)
        return futures

    # paho callbacks (network thread)

    def _connected(self, client: mqtt.Client, userdata: Any, flags: mqtt.ConnectFlags, reason: ReasonCode,
                   properties: Properties | None) -> None:
        if reason.is_failure:
            _settle(self.ready, error=ChimeConnectionError(f"the broker refused the connection: {reason}"))
            return
        with self._lock:
            topics = [self.reply_filter, *self._topics]
            waiting, self._after_connect = self._after_connect, []
        granted = _all_of(self._subscribe(topics))

        def settle(done: Future[None]) -> None:
            error = done.exception()
            for future in [self.ready, *waiting]:
                _settle(future, error=error)

        granted.add_done_callback(settle)

    def _connect_failed(self, client: mqtt.Client, userdata: Any) -> None:
        _settle(self.ready, error=ChimeConnectionError(
            f"could not connect to the broker at {self.options.host}:{self.options.port}"))

    def _subscribed(self, client: mqtt.Client, userdata: Any, mid: int, reasons: list[ReasonCode],
                    properties: Properties | None) -> None:
        with self._lock:
            future = self._subscribing.pop(mid, None)
            if future is None:
                self._early_acks[mid] = reasons
                return
        self._granted(future, reasons)

    @staticmethod
    def _granted(future: Future[None], reasons: list[ReasonCode]) -> None:
        refused = [str(r) for r in reasons if r.is_failure]
        if refused:
            _settle(future, error=ChimeConnectionError(f"the broker refused the subscriptions: {refused}"))
        else:
            _settle(future, result=None)

    def _disconnected(self, client: mqtt.Client, userdata: Any, flags: mqtt.DisconnectFlags, reason: ReasonCode,
                      properties: Properties | None) -> None:
        if not self._closed:
            log.warning("chime_client: disconnected from the broker (%s); reconnecting", reason)

    def _message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            parts = message.topic.removeprefix(f"{self.prefix}/").split("/")
            if len(parts) == 3 and parts[1:] == ["replies", self._reply_suffix]:
                self._reply(parts[0], message)
            elif len(parts) == 2 and parts[1] == "notifications":
                self._deliver(parts[0], message)
        except Exception:  # a bad message or a failing handler must not stop the network thread
            log.exception("chime_client: could not handle a message on %s", message.topic)

    def _deliver(self, device_id: str, message: mqtt.MQTTMessage) -> None:
        subscriptions = getattr(message.properties, "SubscriptionIdentifier", None) or []
        with self._lock:
            sinks = [s for s in self._sinks if s.wants(device_id, subscriptions)]
        if not sinks:
            return
        delivery = Delivery.from_wire(json.loads(message.payload))
        for sink in sinks:
            try:
                sink.push(delivery)
            except Exception:
                log.exception("chime_client: a delivery handler raised")

    def _reply(self, device_id: str, message: mqtt.MQTTMessage) -> None:
        correlation = getattr(message.properties, "CorrelationData", None)
        with self._lock:
            call = self._pending.get(correlation) if isinstance(correlation, bytes) else None
        if call is None or call.device_id != device_id:
            return  # a reply to a call that was answered already (a retry's duplicate) or gave up
        try:
            reply = json.loads(message.payload)
        except ValueError:
            _settle(call.future, error=ChimeError(ErrorCode.INTERNAL, "the reply is not JSON", op=call.op,
                                                  request_id=call.request_id))
            return
        if reply.get("ok") is True:
            result = reply.get("result")
            _settle(call.future, result=result if isinstance(result, dict) else {})
            return
        error = reply.get("error") if isinstance(reply.get("error"), dict) else {}
        _settle(call.future, error=ChimeError(
            str(error.get("code", ErrorCode.INTERNAL)), str(error.get("message", "")), field=error.get("field"),
            op=reply.get("op", call.op), request_id=reply.get("requestId", call.request_id)))


def _timed_out(call: Call, pending: PendingCall, timeout: float, retries: int) -> ChimeTimeoutError:
    return ChimeTimeoutError(f"no reply to {call.op} within {timeout} s ({1 + retries} tries)", op=call.op,
                             request_id=pending.request_id)
