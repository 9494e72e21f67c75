"""The pagers (``pending_notification_requests``, ``inbox``) against replies whose cursor never
ends: a fake chimed on the real mosquitto, and the generators both centers drive."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from chime_client import AsyncNotificationCenter, ChimeError, ErrorCode, NotificationCenter
from chime_client import _ops

from .conftest import REPO, Chime

Answer = Callable[[str, dict[str, Any]], dict[str, Any] | None]


class FakeChimed:
    """Answers each command on ``P/+/cmd/+`` with ``{"ok": true, "result": answer(op, payload)}``
    on its Response Topic with its Correlation Data, at most ``limit`` commands (a client that
    followed its replies forever then waits in vain and times out)."""

    def __init__(self, port: int, prefix: str, answer: Answer, limit: int = 100) -> None:
        self.answered: dict[str, int] = {}
        self._answer = answer
        self._limit = limit
        self._prefix = prefix
        self._port = port
        self._subscribed = threading.Event()
        self._client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
        self._client.on_connect = self._connected
        self._client.on_subscribe = self._on_subscribe
        self._client.on_message = self._message

    def __enter__(self) -> FakeChimed:
        self._client.connect("127.0.0.1", self._port)
        self._client.loop_start()
        assert self._subscribed.wait(10), "the fake chimed did not subscribe"
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._client.disconnect()
        self._client.loop_stop()

    def _connected(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        client.subscribe(f"{self._prefix}/+/cmd/+", qos=1)

    def _on_subscribe(self, client: mqtt.Client, userdata: Any, mid: int, reasons: Any, properties: Any) -> None:
        self._subscribed.set()

    def _message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        op = message.topic.rsplit("/", 1)[-1]
        payload = json.loads(message.payload)
        result = self._answer(op, payload)
        if result is None or sum(self.answered.values()) >= self._limit:
            return
        self.answered[op] = self.answered.get(op, 0) + 1
        reply: dict[str, Any] = {"ok": True, "op": op, "requestId": payload.get("requestId"), "result": result}
        properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        properties.CorrelationData = getattr(message.properties, "CorrelationData")
        client.publish(getattr(message.properties, "ResponseTopic"), json.dumps(reply), qos=1,
                       properties=properties)


def repeating(op: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """Every page says there is more, after the same cursor."""
    if op == "list":
        return {"notifications": [], "cursor": "again"}
    if op == "inbox":
        return {"deliveries": [], "cursor": "again", "dropped": 0}
    return None


def test_pagers_stop_when_a_page_repeats_the_cursor(chime: Chime, device_id: str) -> None:
    with FakeChimed(chime.port, "fake", repeating) as fake:
        with NotificationCenter(device_id, port=chime.port, topic_prefix="fake", timeout=1) as center:
            with pytest.raises(ChimeError) as caught:
                center.pending_notification_requests()
            assert caught.value.code == ErrorCode.INVALID_REPLY and caught.value.op == "list"
            assert caught.value.message == "list page 2 has the cursor of an earlier page: the pages would never end"
            with pytest.raises(ChimeError) as caught:
                center.inbox()
            assert caught.value.code == ErrorCode.INVALID_REPLY and caught.value.op == "inbox"
    assert fake.answered == {"list": 2, "inbox": 2}


def test_async_pagers_stop_when_a_page_repeats_the_cursor(chime: Chime, device_id: str) -> None:
    async def main() -> None:
        async with AsyncNotificationCenter(device_id, port=chime.port, topic_prefix="fake", timeout=1) as center:
            with pytest.raises(ChimeError) as caught:
                await center.pending_notification_requests()
            assert caught.value.code == ErrorCode.INVALID_REPLY
            with pytest.raises(ChimeError) as caught:
                await center.inbox()
            assert caught.value.code == ErrorCode.INVALID_REPLY

    with FakeChimed(chime.port, "fake", repeating) as fake:
        asyncio.run(main())
    assert fake.answered == {"list": 2, "inbox": 2}


@pytest.mark.parametrize("op", ["list", "inbox"])
def test_pagers_stop_after_more_pages_than_a_device_fills(monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    # Three pages at most: two with a cursor, then one that ends the listing.
    monkeypatch.setattr(_ops, "MAX_LIST_PAGES", 3)
    monkeypatch.setattr(_ops, "MAX_INBOX_PAGES", 3)

    def page(cursor: str | None) -> dict[str, Any]:
        rows = "notifications" if op == "list" else "deliveries"
        return {rows: [], "cursor": cursor, "dropped": 0}

    def pager() -> Any:
        return _ops.pending(None, 100) if op == "list" else _ops.inbox(100)

    ending = pager()
    assert next(ending).payload == {"limit": 100}
    assert ending.send(page("1")).payload == {"limit": 100, "cursor": "1"}
    assert ending.send(page("2")).payload == {"limit": 100, "cursor": "2"}
    with pytest.raises(StopIteration):
        ending.send(page(None))

    endless = pager()
    next(endless)
    endless.send(page("1"))
    endless.send(page("2"))
    with pytest.raises(ChimeError) as caught:
        endless.send(page("3"))
    assert caught.value.code == ErrorCode.INVALID_REPLY
    assert caught.value.message.startswith(f"3 {op} pages and a cursor for more")


def test_page_bounds_follow_chimeds_limits() -> None:
    source = (REPO / "Sources" / "ChimeProtocol" / "PageTrail.swift").read_text()

    def limit(name: str) -> int:
        found = re.search(rf"static let {name} = ([0-9_]+)", source)
        assert found is not None, name
        return int(found.group(1).replace("_", ""))

    assert _ops.MAX_PENDING_PER_DEVICE == limit("maxPendingPerDevice")
    assert _ops.MAX_INBOX_PER_DEVICE == limit("maxInboxPerDevice")
    assert _ops.MAX_LIST_PAGES == _ops.MAX_PENDING_PER_DEVICE + 1
    assert _ops.MAX_INBOX_PAGES == _ops.MAX_INBOX_PER_DEVICE + 1
