"""NotificationCenter against the real chimed and mosquitto."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from chime_client import (
    ALL,
    Badge,
    CalendarTrigger,
    ChimeConnectionError,
    ChimeError,
    ChimeTimeoutError,
    DateTrigger,
    Delivery,
    ErrorCode,
    MONDAY_TO_FRIDAY,
    Match,
    NotificationCenter,
    NotificationContent,
    NotificationRequest,
    QuietHours,
    RepeatInterval,
    RRuleTrigger,
    TimeIntervalTrigger,
)

from .conftest import Chime, free_port

PARIS = ZoneInfo("Europe/Paris")


def request(identifier: str, trigger: Any = None, **content: Any) -> NotificationRequest:
    return NotificationRequest(identifier, NotificationContent(**content),
                               trigger if trigger is not None else TimeIntervalTrigger(3600))


def test_daily_calendar_trigger_fires_at_18_wall_clock(center: NotificationCenter) -> None:
    center.update_device_settings(time_zone="Europe/Paris")
    added = center.add(request("medicine", CalendarTrigger(hour=18, minute=0, repeats=True), body="Take it"))
    assert added.identifier == "medicine" and added.next_fire_date is not None
    local = added.next_fire_date.astimezone(PARIS)
    assert (local.hour, local.minute, local.second) == (18, 0, 0)
    assert added.next_fire_date - datetime.now(timezone.utc) <= timedelta(days=1)
    dates = center.preview("medicine", count=3)
    assert dates[0] == added.next_fire_date
    local_dates = [d.astimezone(PARIS) for d in dates]
    assert {(d.hour, d.minute) for d in local_dates} == {(18, 0)}
    assert [(d.date() - local_dates[0].date()).days for d in local_dates] == [0, 1, 2]
    [pending] = center.pending_notification_requests()
    assert isinstance(pending.trigger, RRuleTrigger) and pending.content.body == "Take it"
    assert pending.enabled and pending.next_fire_date == added.next_fire_date


def test_weekday_calendar_trigger_repeats_weekly(center: NotificationCenter) -> None:
    trigger = CalendarTrigger(weekday=2, hour=8, minute=30, repeats=True, time_zone="Europe/Paris")
    dates = center.preview(request("standup", trigger), count=4)
    for date in dates:
        local = date.astimezone(PARIS)
        assert (local.isoweekday(), local.hour, local.minute) == (1, 8, 30)  # Monday
    days = [d.astimezone(PARIS).date() for d in dates]
    assert [b - a for a, b in zip(days, days[1:])] == [timedelta(weeks=1)] * 3


def test_monday_to_friday_is_one_notification(center: NotificationCenter) -> None:
    trigger = CalendarTrigger(weekdays=MONDAY_TO_FRIDAY, hour=18, minute=0, repeats=True, time_zone="Europe/Paris")
    added = center.add(request("workdays", trigger, body="Stand up"))
    [pending] = center.pending_notification_requests()
    assert pending.identifier == "workdays" and pending.next_fire_date == added.next_fire_date
    # chimed lists the rule's parts in an order of its own.
    assert set(pending.fields["rrule"].split(";")) == {"FREQ=WEEKLY", "BYDAY=MO,TU,WE,TH,FR", "BYHOUR=18",
                                                        "BYMINUTE=0", "BYSECOND=0"}
    assert pending.fields["timeZone"] == "Europe/Paris"
    dates = center.preview("workdays", count=10)
    assert dates[0] == added.next_fire_date
    local = [d.astimezone(PARIS) for d in dates]
    assert {(d.hour, d.minute) for d in local} == {(18, 0)}
    assert sorted({d.isoweekday() for d in local}) == [1, 2, 3, 4, 5]  # Monday to Friday, no weekend
    gaps = {(b.date() - a.date()).days for a, b in zip(local, local[1:])}
    assert gaps <= {1, 3} and 3 in gaps  # each weekday once, Friday to Monday over the weekend


def test_an_aware_date_in_a_zone_repeats_on_its_wall_clock(center: NotificationCenter) -> None:
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    nine = datetime(2030, 3, 29, 9, 0, tzinfo=PARIS)  # Paris moves to summer time on Sunday 2030-03-31
    daily = DateTrigger(nine, repeat_interval=RepeatInterval.DAY, count=4)
    dates = center.preview(request("z", daily), start=start)
    assert [d.strftime("%d %H:%M") for d in dates] == ["29 08:00", "30 08:00", "31 07:00", "01 07:00"]
    assert {d.astimezone(PARIS).hour for d in dates} == {9}
    in_utc = DateTrigger(nine.astimezone(timezone.utc), repeat_interval=RepeatInterval.DAY, count=4)
    assert [d.strftime("%H:%M") for d in center.preview(request("u", in_utc), start=start)] == ["08:00"] * 4
    settings = center.update_device_settings(time_zone=ZoneInfo("Asia/Tokyo"))
    assert settings.time_zone == "Asia/Tokyo" and settings.local(dates[0]).hour == 17


def test_one_shot_calendar_trigger_uses_the_device_zone(center: NotificationCenter) -> None:
    with pytest.raises(ChimeError) as caught:
        center.add(request("exam", CalendarTrigger(hour=7)))
    assert caught.value.code == ErrorCode.TIMEZONE_REQUIRED
    center.update_device_settings(time_zone="Asia/Tokyo")
    added = center.add(request("exam", CalendarTrigger(hour=7), body="Exam at 08:00"))
    assert added.next_fire_date is not None
    local = added.next_fire_date.astimezone(ZoneInfo("Asia/Tokyo"))
    assert (local.hour, local.minute) == (7, 0)
    assert timedelta(0) < added.next_fire_date - datetime.now(timezone.utc) <= timedelta(days=1)
    assert center.preview("exam", count=3) == [added.next_fire_date]


def test_delivery_with_badge_and_user_info_arrives(center: NotificationCenter) -> None:
    center.update_device_settings(badge=2)
    sent = time.monotonic()
    center.add(request("soon", TimeIntervalTrigger(1.5), title="Chime", body="Hello", sound="default",
                       badge=Badge.increment(1), user_info={"kind": "hello", "n": 8}))
    delivery = next(center.deliveries(idle_timeout=10))
    assert time.monotonic() - sent >= 1.2
    assert isinstance(delivery, Delivery)
    assert (delivery.identifier, delivery.title, delivery.body, delivery.sound) == ("soon", "Chime", "Hello", "default")
    assert delivery.badge == 3 and delivery.user_info == {"kind": "hello", "n": 8}
    assert delivery.device_id == center.device_id and delivery.fire_id.startswith("soon@")
    assert delivery.last and not delivery.late and delivery.occurrence == 1
    assert center.device_settings().badge == 3
    assert center.pending_notification_requests() == []


def test_delivery_callback(chime: Chime, device_id: str) -> None:
    got: list[tuple[Delivery, int]] = []
    arrived = threading.Event()

    def handle(delivery: Delivery) -> None:
        got.append((delivery, center.device_settings().badge))  # the handler may call the center
        arrived.set()

    with NotificationCenter(device_id, port=chime.port, on_delivery=handle) as center:
        center.add(request("ping", TimeIntervalTrigger(1), body="ping", badge=5))
        assert arrived.wait(10)
    assert [(d.body, d.badge, badge) for d, badge in got] == [("ping", 5, 5)]


def test_time_interval_date_and_rrule_triggers(center: NotificationCenter) -> None:
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    every_minute = center.preview(request("r", TimeIntervalTrigger(60, repeats=True)), count=3, start=start)
    assert [b - a for a, b in zip(every_minute, every_minute[1:])] == [timedelta(seconds=60)] * 2
    monthly = DateTrigger(datetime(2030, 1, 31, 9, 0), time_zone="Europe/Paris", repeat_interval=RepeatInterval.MONTH,
                          count=3)
    assert [d.astimezone(PARIS).date().isoformat() for d in center.preview(request("m", monthly), start=start)] == [
        "2030-01-31", "2030-02-28", "2030-03-31"]
    absolute = DateTrigger(datetime(2030, 6, 1, 12, 0, tzinfo=timezone.utc))
    assert center.preview(request("a", absolute), start=start) == [datetime(2030, 6, 1, 12, 0, tzinfo=timezone.utc)]
    weekdays = RRuleTrigger("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", datetime(2030, 1, 1, 18, 0),
                            time_zone="Europe/Paris", lead_time=timedelta(minutes=15))
    dates = center.preview(request("w", weekdays), count=5, start=start)
    assert [d.astimezone(PARIS).strftime("%a %H:%M") for d in dates] == [
        "Tue 17:45", "Wed 17:45", "Thu 17:45", "Fri 17:45", "Mon 17:45"]


def test_after_aligned_to_noon(center: NotificationCenter) -> None:
    added = center.add(request("come-back", TimeIntervalTrigger(86400, align_to="12:00", time_zone="Europe/Paris")))
    assert added.next_fire_date is not None
    assert added.next_fire_date - datetime.now(timezone.utc) >= timedelta(hours=23, minutes=59)
    local = added.next_fire_date.astimezone(PARIS)
    assert (local.hour, local.minute, local.second) == (12, 0, 0)


def test_pending_follows_every_page(center: NotificationCenter) -> None:
    requests = [request(f"n{i:03d}", body=f"#{i}", user_info={"group": i % 3}) for i in range(150)]
    scheduled = center.add_all(requests)
    assert [s.identifier for s in scheduled] == [r.identifier for r in requests]
    pending = center.pending_notification_requests()
    assert [p.identifier for p in pending] == [f"n{i:03d}" for i in range(150)]
    assert len(center.pending_notification_requests(page_size=40)) == 150
    group = center.pending_notification_requests({"group": 1})
    assert [p.identifier for p in group] == [f"n{i:03d}" for i in range(1, 150, 3)]
    assert center.device_settings().pending == 150
    assert len(center.remove_all_pending()) == 150


def test_remove_pause_resume(center: NotificationCenter) -> None:
    center.add_all([request("a", user_info={"kind": "x"}), request("b", user_info={"kind": "x"}),
                    request("c", user_info={"kind": "y"}), request("d")])
    assert center.pause(["a", "c"]) == ["a", "c"]
    paused = {p.identifier: p for p in center.pending_notification_requests()}
    assert not paused["a"].enabled and paused["a"].next_fire_date is None and paused["b"].enabled
    assert center.resume(Match({"kind": "y"})) == ["c"]
    assert center.resume("a") == ["a"]
    assert center.pause(ALL) == ["a", "b", "c", "d"]
    assert center.resume(ALL) == ["a", "b", "c", "d"]
    assert center.remove_pending(["a", "nope"]) == ["a"]
    assert center.remove_matching({"kind": "x"}) == ["b"]
    assert center.remove_all_pending() == ["c", "d"]
    assert center.pending_notification_requests() == []


def test_add_all_replacing_atomically(center: NotificationCenter) -> None:
    center.add_all([request("recall-1", user_info={"campaign": "recall"}), request("keep")])
    scheduled = center.add_all([request(f"recall-{h}", TimeIntervalTrigger(h * 3600), user_info={"campaign": "recall"})
                                for h in (24, 72, 168)], replacing=Match({"campaign": "recall"}))
    assert [s.identifier for s in scheduled] == ["recall-24", "recall-72", "recall-168"]
    assert [p.identifier for p in center.pending_notification_requests()] == [
        "keep", "recall-168", "recall-24", "recall-72"]


def test_adding_an_existing_identifier_replaces_it(center: NotificationCenter) -> None:
    center.add(request("edit", body="old"))
    center.add(request("edit", body="new"))
    [pending] = center.pending_notification_requests()
    assert pending.content.body == "new"
    center.add(pending.request)  # what was listed can be added back as it is
    assert [p.content.body for p in center.pending_notification_requests()] == ["new"]


def test_snooze(center: NotificationCenter) -> None:
    center.add(request("tea", body="Tea"))
    snoozed = center.snooze("tea", 600)
    assert snoozed is not None and timedelta(minutes=9) < snoozed - datetime.now(timezone.utc) <= timedelta(minutes=10)
    with pytest.raises(ChimeError) as caught:
        center.snooze("nothing", 60)
    assert caught.value.code == ErrorCode.NOT_FOUND and caught.value.field == "id" and caught.value.op == "snooze"


def test_device_settings(center: NotificationCenter) -> None:
    fresh = center.device_settings()
    assert fresh.device_id == center.device_id and fresh.time_zone is None and fresh.badge == 0
    # Every device keeps a history unless it turns it off.
    assert not fresh.receipts and fresh.history and fresh.quiet_hours is None
    changed = center.update_device_settings(time_zone="Asia/Shanghai", badge=4,
                                            quiet_hours=QuietHours("22:00", "07:00"), history=False)
    assert (changed.time_zone, changed.badge, changed.quiet_hours, changed.history) == (
        "Asia/Shanghai", 4, QuietHours("22:00", "07:00"), False)
    cleared = center.update_device_settings(quiet_hours=None, receipts=True)
    assert cleared.quiet_hours is None and cleared.receipts and cleared.time_zone == "Asia/Shanghai"
    assert center.device_settings() == cleared


def test_typed_errors(center: NotificationCenter) -> None:
    with pytest.raises(ChimeError) as not_found:
        center.preview("missing")
    assert not_found.value.code == ErrorCode.NOT_FOUND
    with pytest.raises(ChimeError) as unknown:
        center.command("schedule", {"id": "typo", "after": 5, "alertbody": "Hello"})
    assert (unknown.value.code, unknown.value.field) == ("unknown_field", "alertbody")
    with pytest.raises(ChimeError) as invalid:
        center.add(request("bad", RRuleTrigger("FREQ=FORTNIGHTLY", datetime(2030, 1, 1, 9, 0), time_zone="UTC")))
    assert (invalid.value.code, invalid.value.field) == ("invalid_argument", "rrule")
    assert invalid.value.message and invalid.value.request_id
    with pytest.raises(ChimeError) as never:
        center.add(request("past", DateTrigger(datetime(2020, 1, 1, tzinfo=timezone.utc), repeat_interval="day",
                                               until=datetime(2020, 2, 1, tzinfo=timezone.utc))))
    assert never.value.code == ErrorCode.NEVER_FIRES
    with pytest.raises(ChimeError) as zone:
        center.update_device_settings(time_zone="Mars/Olympus")
    assert (zone.value.code, zone.value.field) == ("invalid_argument", "timeZone")
    assert center.pending_notification_requests() == []


def test_receipts_inbox_after_being_offline(chime: Chime, device_id: str) -> None:
    with NotificationCenter(device_id, port=chime.port) as phone:
        phone.update_device_settings(receipts=True)
        phone.add(request("pill", TimeIntervalTrigger(1), body="Take your pill", badge=Badge.increment(1)))
    time.sleep(2)  # fires while the phone is off
    with NotificationCenter(device_id, port=chime.port) as phone:
        inbox = phone.inbox()
        assert [d.body for d in inbox.deliveries] == ["Take your pill"] and inbox.dropped == 0
        fire_id = inbox.deliveries[0].fire_id
        [entry] = phone.history()
        assert (entry.fire_id, entry.state, entry.acknowledged_at) == (fire_id, "unacknowledged", None)
        assert (entry.mqtt, entry.push_outcome) == ("acknowledged", None) and entry.fire_date is not None
        assert phone.ack([fire_id], badge=Badge.decrement(1)).acknowledged == 1
        assert phone.device_settings().badge == 0
        again = phone.ack(fire_id, badge=Badge.decrement(1))  # applied once however often it is sent
        assert again.acknowledged == 0 and again.unknown == []
        assert phone.ack(["nobody@2026-01-01T00:00:00Z"]).unknown == ["nobody@2026-01-01T00:00:00Z"]
        assert phone.inbox().deliveries == []
        [entry] = phone.history()
        assert entry.state == "acknowledged" and entry.acknowledged_at is not None


def test_inbox_and_history_pages(center: NotificationCenter) -> None:
    center.update_device_settings(receipts=True)
    center.add_all([request(f"m{i}", TimeIntervalTrigger(0.2 + i * 0.05), body=str(i)) for i in range(5)])
    deadline = time.monotonic() + 10
    while len(center.history()) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    inbox = center.inbox(page_size=2)
    assert [d.body for d in inbox.deliveries] == ["0", "1", "2", "3", "4"]
    history = center.history()
    assert [h.identifier for h in history] == ["m4", "m3", "m2", "m1", "m0"]
    assert len(center.history(limit=2)) == 2
    assert center.history(since=datetime.now(timezone.utc) + timedelta(minutes=1)) == []


def test_update_changes_only_the_given_fields(center: NotificationCenter) -> None:
    center.add(NotificationRequest("switch", NotificationContent(title="T", body="old", user_info={"k": 1}),
                                   CalendarTrigger(hour=9, minute=0, repeats=True, time_zone="Europe/Paris"),
                                   enabled=False))
    updated = center.update("switch", body="new", title=None)
    assert updated.identifier == "switch" and updated.next_fire_date is None  # still switched off
    [pending] = center.pending_notification_requests()
    assert (pending.content.body, pending.content.title, pending.content.user_info) == ("new", None, {"k": 1})
    assert not pending.enabled and pending.fields["rrule"].startswith("FREQ=DAILY")
    moved = center.update("switch", trigger=DateTrigger(datetime(2030, 1, 1, 9, 0), time_zone="Europe/Paris"),
                          enabled=True)
    assert moved.next_fire_date == datetime(2030, 1, 1, 8, 0, tzinfo=timezone.utc)
    [pending] = center.pending_notification_requests()
    assert "rrule" not in pending.fields and pending.enabled and pending.content.body == "new"
    with pytest.raises(ChimeError) as caught:
        center.update("missing", body="x")
    assert caught.value.code == ErrorCode.NOT_FOUND


def test_timeout_and_retry_resend_the_same_bytes(chime: Chime, device_id: str) -> None:
    seen: list[tuple[bytes, bytes, str]] = []
    spy = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)

    def record(client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        seen.append((bytes(message.payload), getattr(message.properties, "CorrelationData"),
                     getattr(message.properties, "ResponseTopic")))

    spy.on_message = record
    spy.connect("127.0.0.1", chime.port)
    spy.subscribe("silent/#", qos=1)
    spy.loop_start()
    try:
        time.sleep(0.3)
        # No chimed serves the prefix "silent": nothing answers.
        with NotificationCenter(device_id, port=chime.port, topic_prefix="silent", timeout=0.4, retries=2) as center:
            started = time.monotonic()
            with pytest.raises(ChimeTimeoutError) as caught:
                center.add(request("x", body="hello"))
            assert time.monotonic() - started >= 1.1
            assert caught.value.code == ErrorCode.TIMEOUT and caught.value.op == "schedule"
            with pytest.raises(ChimeTimeoutError):
                center.device_settings(timeout=0.2, retries=0)
        time.sleep(0.2)
    finally:
        spy.loop_stop()
        spy.disconnect()
    schedules = [s for s in seen if b'"after"' in s[0]]
    assert len(schedules) == 3 and len(set(schedules)) == 1
    payload, correlation, reply_topic = schedules[0]
    assert json.loads(payload)["requestId"] == correlation.decode()
    assert reply_topic.startswith(f"silent/{device_id}/replies/")
    assert len([s for s in seen if s not in schedules]) == 1


def test_a_resent_command_is_applied_once(center: NotificationCenter) -> None:
    connection = center._connection
    assert connection is not None
    call = connection.prepare(center.device_id, "schedule", {"id": "once", "after": 3600})
    connection.send(call)
    first = call.future.result(5)
    assert first["scheduled"][0]["id"] == "once"
    duplicate = connection.prepare(center.device_id, "schedule", {"id": "once", "after": 3600})
    # The same bytes and correlation data as the first: what a retry sends.
    duplicate.payload, duplicate.properties = call.payload, call.properties
    connection.forget(duplicate)
    connection._pending[call.request_id.encode()] = duplicate
    connection.send(duplicate)
    assert duplicate.future.result(5) == {"duplicate": True}
    assert [p.identifier for p in center.pending_notification_requests()] == ["once"]


def test_connection_failures(chime: Chime, device_id: str) -> None:
    with pytest.raises(ChimeConnectionError) as caught:
        NotificationCenter(device_id, port=free_port(), timeout=3).connect()
    assert caught.value.code == ErrorCode.TRANSPORT
    center = NotificationCenter(device_id, port=chime.port)
    with pytest.raises(ChimeConnectionError):
        center.device_settings()
    with center:
        center.device_settings()
    with pytest.raises(ChimeConnectionError):
        center.device_settings()
    with pytest.raises(ChimeConnectionError):
        center.next_delivery(0.1)
    with pytest.raises(ValueError):
        NotificationCenter("no/slashes", port=chime.port).connect()


def test_raw_command(center: NotificationCenter) -> None:
    result = center.command("device", {"timeZone": "Europe/Paris"})
    assert result["timeZone"] == "Europe/Paris" and result["deviceId"] == center.device_id


def test_readme_example_runs(chime: Chime) -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "README.md has no python example"
    for code in blocks:
        code = code.replace("port=1883", f"port={chime.port}")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
