"""AsyncNotificationCenter against the real chimed and mosquitto (each test runs its own event loop)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from chime_client import (
    ALL,
    AsyncNotificationCenter,
    Badge,
    CalendarTrigger,
    ChimeConnectionError,
    ChimeError,
    ChimeTimeoutError,
    DateTrigger,
    ErrorCode,
    Match,
    NotificationContent,
    NotificationRequest,
    QuietHours,
    RRuleTrigger,
    TimeIntervalTrigger,
)

from .conftest import Chime, free_port

Scenario = Callable[[AsyncNotificationCenter], Awaitable[None]]


def run(chime: Chime, device_id: str, scenario: Scenario, **options: Any) -> None:
    async def main() -> None:
        async with AsyncNotificationCenter(device_id, "127.0.0.1", chime.port, timeout=5, **options) as center:
            await scenario(center)

    asyncio.run(main())


def request(identifier: str, trigger: Any = None, **content: Any) -> NotificationRequest:
    return NotificationRequest(identifier, NotificationContent(**content),
                               trigger if trigger is not None else TimeIntervalTrigger(3600))


def test_async_scheduling(chime: Chime, device_id: str) -> None:
    async def scenario(center: AsyncNotificationCenter) -> None:
        await center.update_device_settings(time_zone="America/New_York")
        added = await center.add(request("daily", CalendarTrigger(hour=18, minute=0, repeats=True), body="Daily"))
        assert added.next_fire_date is not None
        local = added.next_fire_date.astimezone(ZoneInfo("America/New_York"))
        assert (local.hour, local.minute) == (18, 0)
        once = await center.add(request("once", CalendarTrigger(hour=7)))
        assert once.next_fire_date is not None
        assert once.next_fire_date.astimezone(ZoneInfo("America/New_York")).hour == 7
        start = datetime(2030, 1, 1, tzinfo=timezone.utc)
        rule = RRuleTrigger("FREQ=WEEKLY;BYDAY=MO,FR", datetime(2030, 1, 1, 9, 0), time_zone="UTC")
        assert [d.strftime("%a") for d in await center.preview(request("x", rule), count=4, start=start)] == [
            "Fri", "Mon", "Fri", "Mon"]
        assert (await center.preview("daily", count=2))[0] == added.next_fire_date
        await center.add_all([request(f"p{i:03d}", user_info={"even": i % 2 == 0}) for i in range(120)],
                             replacing=ALL)
        pending = await center.pending_notification_requests()
        assert [p.identifier for p in pending] == [f"p{i:03d}" for i in range(120)]
        assert len(await center.pending_notification_requests({"even": True})) == 60
        assert await center.pause(["p000", "p001"]) == ["p000", "p001"]
        assert await center.resume(Match({"even": True})) == [f"p{i:03d}" for i in range(0, 120, 2)]
        assert await center.remove_pending("p001") == ["p001"]
        assert len(await center.remove_matching({"even": False})) == 59
        snoozed = await center.snooze("p002", 60)
        assert snoozed is not None and snoozed > datetime.now(timezone.utc)
        assert len(await center.remove_all_pending()) == 60
        assert await center.pending_notification_requests() == []

    run(chime, device_id, scenario)


def test_async_delivery_iterator(chime: Chime, device_id: str) -> None:
    async def scenario(center: AsyncNotificationCenter) -> None:
        sent = time.monotonic()
        await center.add(request("soon", TimeIntervalTrigger(1.2), body="Soon", badge=Badge.increment(2),
                                 user_info={"screen": "tea", "ids": [1, 2]}))
        async with asyncio.timeout(10):
            async for delivery in center.deliveries():
                break
        assert time.monotonic() - sent >= 1.0
        assert (delivery.identifier, delivery.body, delivery.badge) == ("soon", "Soon", 2)
        assert delivery.user_info == {"screen": "tea", "ids": [1, 2]}
        with pytest.raises(ChimeTimeoutError):
            await center.next_delivery(timeout=0.2)
        assert [d async for d in center.deliveries(idle_timeout=0.2)] == []

    run(chime, device_id, scenario)


def test_async_device_and_receipts(chime: Chime, device_id: str) -> None:
    async def phone_off(center: AsyncNotificationCenter) -> None:
        settings = await center.update_device_settings(receipts=True, badge=1,
                                                       quiet_hours=QuietHours("23:00", "06:00"),
                                                       time_zone="Asia/Shanghai")
        assert settings.receipts and settings.history and settings.badge == 1
        assert settings.quiet_hours == QuietHours("23:00", "06:00")
        assert (await center.update_device_settings(quiet_hours=None)).quiet_hours is None
        await center.add(request("pill", TimeIntervalTrigger(0.8), body="Pill", badge=Badge.increment(1)))

    async def phone_on(center: AsyncNotificationCenter) -> None:
        inbox = await center.inbox()
        assert [d.identifier for d in inbox.deliveries] == ["pill"] and inbox.deliveries[0].badge == 2
        fire_id = inbox.deliveries[0].fire_id
        assert [h.state for h in await center.history()] == ["unacknowledged"]
        acked = await center.ack([fire_id], badge=Badge.decrement(2))
        assert acked.acknowledged == 1 and acked.unknown == []
        assert (await center.device_settings()).badge == 0
        assert (await center.inbox()).deliveries == []
        [entry] = await center.history(since=datetime.now(timezone.utc) - timedelta(minutes=1), limit=10)
        assert entry.state == "acknowledged" and entry.fire_id == fire_id

    run(chime, device_id, phone_off)
    time.sleep(1.8)
    run(chime, device_id, phone_on)


def test_async_typed_errors(chime: Chime, device_id: str) -> None:
    async def scenario(center: AsyncNotificationCenter) -> None:
        with pytest.raises(ChimeError) as not_found:
            await center.snooze("missing", 10)
        assert not_found.value.code == ErrorCode.NOT_FOUND
        with pytest.raises(ChimeError) as unknown:
            await center.command("device", {"timezone": "Europe/Paris"})
        assert (unknown.value.code, unknown.value.field) == (ErrorCode.UNKNOWN_FIELD, "timezone")
        with pytest.raises(ChimeError) as invalid:
            await center.add(request("bad", DateTrigger(datetime(2030, 1, 1, 9, 0), time_zone="UTC",
                                                        repeat_interval="fortnight")))
        assert (invalid.value.code, invalid.value.field) == (ErrorCode.INVALID_ARGUMENT, "repeatInterval")
        with pytest.raises(ChimeError) as zone:
            await center.add(request("wall", CalendarTrigger(hour=9)))
        assert zone.value.code == ErrorCode.TIMEZONE_REQUIRED

    run(chime, device_id, scenario)


def test_async_timeout_retries_and_connection_errors(chime: Chime, device_id: str) -> None:
    async def scenario(center: AsyncNotificationCenter) -> None:
        started = time.monotonic()
        with pytest.raises(ChimeTimeoutError) as caught:
            await center.device_settings(timeout=0.3, retries=1)
        assert time.monotonic() - started >= 0.55 and caught.value.op == "device"

    run(chime, device_id, scenario, topic_prefix="silent")

    async def unreachable() -> None:
        with pytest.raises(ChimeConnectionError):
            await AsyncNotificationCenter(device_id, port=free_port(), timeout=3).connect()
        center = AsyncNotificationCenter(device_id, port=chime.port)
        with pytest.raises(ChimeConnectionError):
            await center.device_settings()
        async with center:
            await center.device_settings()
        with pytest.raises(ChimeConnectionError):
            await center.device_settings()

    asyncio.run(unreachable())


def test_async_update(chime: Chime, device_id: str) -> None:
    async def scenario(center: AsyncNotificationCenter) -> None:
        await center.add(NotificationRequest("r", NotificationContent(body="old", sound="default"),
                                             TimeIntervalTrigger(3600), enabled=False))
        updated = await center.update("r", body="new", sound=None, badge=Badge.increment(1))
        assert updated.identifier == "r" and updated.next_fire_date is None
        [pending] = await center.pending_notification_requests()
        assert (pending.content.body, pending.content.sound, pending.content.badge) == ("new", None, Badge(1))
        assert not pending.enabled
        with pytest.raises(ChimeError) as caught:
            await center.update("missing", body="x")
        assert caught.value.code == ErrorCode.NOT_FOUND

    run(chime, device_id, scenario)
