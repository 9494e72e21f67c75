"""The MQTT 5 connection a center talks through: paho-mqtt's network thread, request/reply
correlation (PROTOCOL.md section 4) and deliveries. Both centers share it."""

from __future__ import annotations

import json
import logging
import re
import ssl
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from ._wire import encode
from .errors import ChimeConnectionError, ChimeError, ErrorCode
from .models import Delivery

log = logging.getLogger("chime_client")

_DEVICE_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


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
    receive_deliveries: bool = True


class PendingCall:
    """One command in flight: its exact bytes and properties (a retry resends them as they
    are) and the future its reply resolves."""

    def __init__(self, op: str, topic: str, payload: bytes, request_id: str, properties: Properties) -> None:
        self.op = op
        self.topic = topic
        self.payload = payload
        self.request_id = request_id
        self.properties = properties
        self.future: Future[dict[str, Any]] = Future()


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


class Connection:
    def __init__(self, device_id: str, options: ConnectionOptions, on_delivery: Callable[[Delivery], None]) -> None:
        if not _DEVICE_ID.fullmatch(device_id):
            raise ValueError(f"a device id is 1 to 128 characters from A-Z a-z 0-9 _ . : @ -, got {device_id!r}")
        self.device_id = device_id
        self.options = options
        prefix = options.topic_prefix
        self.command_prefix = f"{prefix}/{device_id}/cmd/"
        self.reply_topic = f"{prefix}/{device_id}/replies/py-{uuid.uuid4().hex[:16]}"
        self.notifications_topic = f"{prefix}/{device_id}/notifications"
        self._on_delivery = on_delivery
        self._pending: dict[bytes, PendingCall] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.ready: Future[None] = Future()
        client_id = options.client_id or f"chime-py-{uuid.uuid4().hex[:16]}"
        self._client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                   protocol=MQTTProtocolVersion.MQTTv5)
        if options.username is not None:
            self._client.username_pw_set(options.username, options.password)
        if options.tls is not None:
            self._client.tls_set_context(options.tls)
        self._client.reconnect_delay_set(1, 30)
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

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
        self._client.disconnect()
        self._client.loop_stop()
        closed = ChimeConnectionError("the center was closed")
        _settle(self.ready, error=closed)
        for call in pending:
            _settle(call.future, error=ChimeConnectionError(f"the center was closed before {call.op} was answered",
                                                            op=call.op, request_id=call.request_id))

    # Requests

    def prepare(self, op: str, payload: dict[str, Any]) -> PendingCall:
        request_id = uuid.uuid4().hex
        properties = _properties(PacketTypes.PUBLISH)
        properties.ResponseTopic = self.reply_topic
        properties.CorrelationData = request_id.encode()
        properties.ContentType = "application/json"
        call = PendingCall(op, self.command_prefix + op, encode({**payload, "requestId": request_id}), request_id,
                           properties)
        with self._lock:
            if self._closed:
                raise ChimeConnectionError("the center is closed", op=op)
            self._pending[request_id.encode()] = call
        return call

    def send(self, call: PendingCall) -> None:
        """Publishes the call's bytes (again, for a retry). While the connection is down paho
        queues the message and sends it on reconnect."""
        if self._closed:
            raise ChimeConnectionError("the center is closed", op=call.op, request_id=call.request_id)
        info = self._client.publish(call.topic, call.payload, qos=1, properties=call.properties)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            raise ChimeConnectionError(f"could not publish {call.op}: {mqtt.error_string(info.rc)}", op=call.op,
                                       request_id=call.request_id)

    def forget(self, call: PendingCall) -> None:
        with self._lock:
            self._pending.pop(call.request_id.encode(), None)

    # paho callbacks (network thread)

    def _connected(self, client: mqtt.Client, userdata: Any, flags: mqtt.ConnectFlags, reason: ReasonCode,
                   properties: Properties | None) -> None:
        if reason.is_failure:
            _settle(self.ready, error=ChimeConnectionError(f"the broker refused the connection: {reason}"))
            return
        topics = [(self.reply_topic, SubscribeOptions(qos=1))]
        if self.options.receive_deliveries:
            topics.append((self.notifications_topic, SubscribeOptions(qos=1)))
        client.subscribe(topics)

    def _connect_failed(self, client: mqtt.Client, userdata: Any) -> None:
        _settle(self.ready, error=ChimeConnectionError(
            f"could not connect to the broker at {self.options.host}:{self.options.port}"))

    def _subscribed(self, client: mqtt.Client, userdata: Any, mid: int, reasons: list[ReasonCode],
                    properties: Properties | None) -> None:
        refused = [str(r) for r in reasons if r.is_failure]
        if refused:
            _settle(self.ready, error=ChimeConnectionError(f"the broker refused the subscriptions: {refused}"))
        else:
            _settle(self.ready, result=None)

    def _disconnected(self, client: mqtt.Client, userdata: Any, flags: mqtt.DisconnectFlags, reason: ReasonCode,
                      properties: Properties | None) -> None:
        if not self._closed:
            log.warning("chime_client: disconnected from the broker (%s); reconnecting", reason)

    def _message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        try:
            if message.topic == self.reply_topic:
                self._reply(message)
            elif message.topic == self.notifications_topic:
                self._on_delivery(Delivery.from_wire(json.loads(message.payload)))
        except Exception:  # a bad message or a failing handler must not stop the network thread
            log.exception("chime_client: could not handle a message on %s", message.topic)

    def _reply(self, message: mqtt.MQTTMessage) -> None:
        correlation = getattr(message.properties, "CorrelationData", None)
        with self._lock:
            call = self._pending.get(correlation) if isinstance(correlation, bytes) else None
        if call is None:
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
