"""Trigger and request → JSON, with no broker."""

from __future__ import annotations

import inspect
import json
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from chime_client import (
    ALL,
    MAX_BADGE,
    MONDAY_TO_FRIDAY,
    WEEKEND,
    Badge,
    CalendarTrigger,
    ChimeError,
    DateTrigger,
    DeviceSettings,
    Match,
    NotificationContent,
    NotificationRequest,
    PendingNotification,
    RepeatInterval,
    RRuleTrigger,
    TimeIntervalTrigger,
    Weekday,
)
from chime_client._ops import selector
from chime_client._wire import encode, format_datetime, parse_datetime

NOW = datetime(2026, 12, 1, 14, 0, 30, 250000, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("components", "rule"),
    [
        ({"hour": 18, "minute": 0}, "FREQ=DAILY;BYHOUR=18;BYMINUTE=0;BYSECOND=0"),
        ({"hour": 18}, "FREQ=DAILY;BYHOUR=18;BYMINUTE=0;BYSECOND=0"),
        ({"weekday": 2, "hour": 8, "minute": 30}, "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=30;BYSECOND=0"),
        ({"weekday": 1}, "FREQ=WEEKLY;BYDAY=SU;BYHOUR=0;BYMINUTE=0;BYSECOND=0"),
        ({"weekday": 7, "hour": 10}, "FREQ=WEEKLY;BYDAY=SA;BYHOUR=10;BYMINUTE=0;BYSECOND=0"),
        ({"day": 1, "hour": 9}, "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0;BYSECOND=0"),
        ({"day": 31}, "FREQ=MONTHLY;BYMONTHDAY=31;BYHOUR=0;BYMINUTE=0;BYSECOND=0"),
        ({"month": 12, "day": 25}, "FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=25;BYHOUR=0;BYMINUTE=0;BYSECOND=0"),
        ({"month": 3}, "FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=1;BYHOUR=0;BYMINUTE=0;BYSECOND=0"),
        ({"month": 2, "weekday": 2, "hour": 7}, "FREQ=YEARLY;BYMONTH=2;BYDAY=MO;BYHOUR=7;BYMINUTE=0;BYSECOND=0"),
        ({"day": 13, "weekday": 6}, "FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR;BYHOUR=0;BYMINUTE=0;BYSECOND=0"),
        ({"month": 12, "hour": 18}, "FREQ=DAILY;BYMONTH=12;BYHOUR=18;BYMINUTE=0;BYSECOND=0"),
        ({"minute": 30}, "FREQ=HOURLY;BYMINUTE=30;BYSECOND=0"),
        ({"second": 15}, "FREQ=MINUTELY;BYSECOND=15"),
        ({"hour": 6, "minute": 5, "second": 4}, "FREQ=DAILY;BYHOUR=6;BYMINUTE=5;BYSECOND=4"),
    ],
)
def test_calendar_components_map_to_rrule(components: dict[str, int], rule: str) -> None:
    assert CalendarTrigger(**components, repeats=True).rrule() == rule  # type: ignore[arg-type]


def test_repeating_calendar_trigger_is_anchored_before_now_and_follows_the_device_zone() -> None:
    wire = CalendarTrigger(hour=18, minute=0, repeats=True).wire(NOW)
    assert wire == {"fireDate": "2026-11-30T00:00:00", "rrule": "FREQ=DAILY;BYHOUR=18;BYMINUTE=0;BYSECOND=0"}
    assert not CalendarTrigger(hour=18, repeats=True).needs_device_zone


def test_repeating_calendar_trigger_with_zone_and_lead_time() -> None:
    wire = CalendarTrigger(weekday=2, hour=8, repeats=True, time_zone="Asia/Shanghai", lead_time=900).wire(NOW)
    assert wire == {"fireDate": "2026-11-30T00:00:00", "timeZone": "Asia/Shanghai",
                    "rrule": "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0;BYSECOND=0", "leadTime": 900}


def test_one_shot_calendar_trigger_is_the_next_match_after_now_in_the_zone() -> None:
    trigger = CalendarTrigger(hour=7)
    assert trigger.needs_device_zone
    # 14:00:30.25 UTC is 23:00:30 in Tokyo: DTSTART one second later, the rule's one occurrence.
    assert trigger.wire(NOW, "Asia/Tokyo") == {
        "fireDate": "2026-12-01T23:00:31", "rrule": "FREQ=DAILY;BYHOUR=7;BYMINUTE=0;BYSECOND=0;COUNT=1"}
    explicit = CalendarTrigger(hour=7, time_zone="America/New_York")
    assert not explicit.needs_device_zone
    assert explicit.wire(NOW) == {"fireDate": "2026-12-01T09:00:31", "timeZone": "America/New_York",
                                  "rrule": "FREQ=DAILY;BYHOUR=7;BYMINUTE=0;BYSECOND=0;COUNT=1"}


def test_one_shot_calendar_trigger_without_a_zone_is_timezone_required() -> None:
    with pytest.raises(ChimeError) as caught:
        CalendarTrigger(hour=7).wire(NOW, None)
    assert caught.value.code == "timezone_required" and caught.value.field == "timeZone"
    with pytest.raises(ChimeError) as invalid:
        CalendarTrigger(hour=7, time_zone="Mars/Olympus").wire(NOW)
    assert invalid.value.code == "invalid_argument"


@pytest.mark.parametrize("components", [{}, {"hour": 24}, {"weekday": 0}, {"weekday": 8}, {"day": 32},
                                        {"month": 13}, {"minute": -1}, {"hour": True}])
def test_calendar_components_are_checked(components: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        CalendarTrigger(**components)  # type: ignore[arg-type]


def test_time_interval_trigger() -> None:
    assert TimeIntervalTrigger(8).wire(NOW) == {"after": 8}
    assert TimeIntervalTrigger(1.5).wire(NOW) == {"after": 1.5}
    assert TimeIntervalTrigger(timedelta(minutes=2), repeats=True).wire(NOW) == {
        "after": 120, "rrule": "FREQ=SECONDLY;INTERVAL=120"}
    assert TimeIntervalTrigger(86400, align_to="12:00", time_zone="Europe/Paris").wire(NOW) == {
        "after": 86400, "alignTo": "12:00", "timeZone": "Europe/Paris"}
    with pytest.raises(ValueError):
        TimeIntervalTrigger(0)
    with pytest.raises(ValueError):
        TimeIntervalTrigger(1.5, repeats=True)


def test_date_trigger_absolute_and_wall_clock() -> None:
    aware = datetime(2026, 12, 1, 19, 0, tzinfo=timezone(timedelta(hours=1)))
    assert DateTrigger(aware).wire(NOW) == {"fireDate": "2026-12-01T18:00:00Z"}
    assert DateTrigger(datetime(2026, 12, 1, 18, 0, 0, 500000, tzinfo=timezone.utc)).wire(NOW) == {
        "fireDate": "2026-12-01T18:00:00.500Z"}
    wall = DateTrigger(datetime(2027, 1, 31, 9, 0), time_zone="Europe/Paris", repeat_interval=RepeatInterval.MONTH,
                       count=3, until=datetime(2027, 12, 31, 0, 0), exdates=[datetime(2027, 2, 28, 9, 0)],
                       lead_time=timedelta(minutes=15))
    assert wall.wire(NOW) == {"fireDate": "2027-01-31T09:00:00", "timeZone": "Europe/Paris",
                              "repeatInterval": "month", "count": 3, "until": "2027-12-31T00:00:00",
                              "exdates": ["2027-02-28T09:00:00"], "leadTime": 900}
    assert DateTrigger(datetime(2027, 1, 1, 8, 0), repeat_interval="weekOfYear").wire(NOW) == {
        "fireDate": "2027-01-01T08:00:00", "repeatInterval": "weekOfYear"}
    with pytest.raises(ValueError):
        DateTrigger(datetime(2027, 1, 1, 8, 0, 0, 1)).wire(NOW)


def test_rrule_trigger() -> None:
    trigger = RRuleTrigger("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", datetime(2026, 12, 1, 18, 0),
                           time_zone="Europe/Paris", lead_time=600)
    assert trigger.wire(NOW) == {"fireDate": "2026-12-01T18:00:00", "timeZone": "Europe/Paris",
                                 "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "leadTime": 600}


def test_request_carries_content_and_options() -> None:
    request = NotificationRequest(
        "med",
        NotificationContent(title="Chime", body="Take your medicine", action="Open", has_action=True,
                            sound="default", category="health", badge=Badge.increment(1),
                            user_info={"kind": "med", "n": [1, 2.5, None]}),
        TimeIntervalTrigger(5),
        expires_after=3600, misfire="skip", ignore_quiet_hours=True, enabled=False, keep_after_firing=True,
    )
    assert request.wire(NOW) == {
        "id": "med", "after": 5, "alertTitle": "Chime", "alertBody": "Take your medicine", "alertAction": "Open",
        "hasAction": True, "soundName": "default", "category": "health", "badge": "+1",
        "userInfo": {"kind": "med", "n": [1, 2.5, None]}, "expiresAfter": 3600, "misfire": "skip",
        "ignoreQuietHours": True, "enabled": False, "keepAfterFiring": True,
    }
    pushed = NotificationRequest("p", NotificationContent(body="b", thread_id="meds", interruption_level="timeSensitive"),
                                 None, channels="push")
    assert pushed.wire(NOW) == {"id": "p", "after": 0.001, "alertBody": "b", "threadId": "meds",
                                "interruptionLevel": "timeSensitive", "channels": "push"}
    assert NotificationContent.from_wire(pushed.wire(NOW)) == pushed.content
    alternatives = NotificationRequest("x", NotificationContent(alert_bodies=["a", "b"], badge=0), None)
    assert alternatives.wire(NOW) == {"id": "x", "after": 0.001, "alertBodies": ["a", "b"], "badge": 0}


def test_push_registrations_go_as_the_wire_has_them() -> None:
    from chime_client._ops import device
    apns = {"apns": {"token": "0a" * 32, "topic": "com.example.pills"}}
    ops = device({"add_push": [apns]})
    call = next(ops)
    assert (call.op, call.payload) == ("device", {"addPush": [apns]})
    with pytest.raises(StopIteration) as done:
        ops.send({"deviceId": "d", "badge": 0, "pending": 0, "receipts": False, "history": True,
                  "push": [{"id": "apns-427b2ea0", "provider": "apns", "token": "0a0a0a…0a0a"}]})
    assert done.value.value.push == ({"id": "apns-427b2ea0", "provider": "apns", "token": "0a0a0a…0a0a"},)
    assert next(device({"remove_push": ["apns-427b2ea0"]})).payload == {"removePush": ["apns-427b2ea0"]}
    assert next(device({"push": []})).payload == {"push": []}


def test_badges() -> None:
    assert Badge.increment(3).wire() == "+3"
    assert Badge.decrement(2).wire() == "-2"
    assert Badge.increment().wire() == "+1"
    assert Badge.parse("+4") == Badge.increment(4) and Badge.parse("-1") == Badge.decrement(1)
    assert Badge.parse(7) == 7 and Badge.parse(None) is None
    with pytest.raises(ValueError):
        Badge.increment(-1)


def test_selectors() -> None:
    assert selector("a") == {"ids": ["a"]}
    assert selector(["a", "b"]) == {"ids": ["a", "b"]}
    assert selector(Match({"kind": "med"})) == {"match": {"userInfo": {"kind": "med"}}}
    assert selector(ALL) == {"all": True}
    with pytest.raises(ValueError):
        selector([])


def test_dates_and_bytes() -> None:
    assert format_datetime(datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=timezone.utc)) == "2026-12-01T10:00:00.123Z"
    assert format_datetime(datetime(2026, 12, 1, 18, 0)) == "2026-12-01T18:00:00"
    assert parse_datetime("2026-12-01T10:00:05.120Z") == datetime(2026, 12, 1, 10, 0, 5, 120000, tzinfo=timezone.utc)
    assert parse_datetime("2026-12-01T18:00:00") == datetime(2026, 12, 1, 18, 0)
    assert encode({"alertBody": "Café", "after": 1}) == '{"alertBody":"Café","after":1}'.encode()
    with pytest.raises(ValueError):
        encode({"after": float("nan")})


def test_pending_notification_reads_back_what_list_returns() -> None:
    listed = json.loads(
        '{"id":"b","fireDate":"2026-11-29T00:00:00","timeZone":"Europe/Paris",'
        '"rrule":"FREQ=DAILY;BYSECOND=0;BYMINUTE=0;BYHOUR=18","alertBody":"hi","badge":"+1","userInfo":{"k":1},'
        '"enabled":false,"nextFireDate":null,"firedCount":2,"lastFiredAt":"2026-11-30T17:00:00Z",'
        '"createdAt":"2026-11-29T10:00:00.471Z","updatedAt":"2026-11-29T10:00:00.471Z"}')
    pending = PendingNotification.from_wire(listed)
    assert pending.identifier == "b" and pending.content.body == "hi" and pending.content.badge == Badge(1)
    assert pending.trigger == RRuleTrigger("FREQ=DAILY;BYSECOND=0;BYMINUTE=0;BYHOUR=18", datetime(2026, 11, 29),
                                           time_zone="Europe/Paris", exdates=[])
    assert not pending.enabled and pending.next_fire_date is None and pending.fired_count == 2
    assert pending.last_fired_at == datetime(2026, 11, 30, 17, 0, tzinfo=timezone.utc)
    # Read-modify-write: what was listed is a request again.
    assert pending.request.wire(NOW)["rrule"] == "FREQ=DAILY;BYSECOND=0;BYMINUTE=0;BYHOUR=18"
    assert pending.request.wire(NOW)["enabled"] is False


def test_update_sends_only_the_given_fields_and_null_for_cleared_ones() -> None:
    from chime_client import _ops

    call = next(_ops.update("r", None, {"body": "new", "title": None, "badge": Badge.decrement(1), "enabled": False}))
    assert (call.op, call.payload) == ("update", {"id": "r", "alertBody": "new", "alertTitle": None, "badge": "-1",
                                                  "enabled": False})
    # A new trigger replaces the schedule: the trigger fields it does not set are cleared.
    moved = next(_ops.update("r", DateTrigger(datetime(2030, 1, 1, 9, 0), time_zone="Europe/Paris"), {}))
    assert moved.payload == {"id": "r", "fireDate": "2030-01-01T09:00:00", "timeZone": "Europe/Paris",
                             "repeatInterval": None, "rrule": None, "count": None, "until": None, "exdates": None,
                             "leadTime": None}
    with pytest.raises(TypeError):
        next(_ops.update("r", None, {"bdy": "typo"}))  # type: ignore[typeddict-unknown-key]


def public_methods(cls: type) -> dict[str, list[str]]:
    """Every public method of a class, its own and inherited, with its parameters."""
    return {name: list(inspect.signature(member).parameters) for name, member in inspect.getmembers(cls)
            if not name.startswith("_") and callable(member)}


def test_sync_and_async_clients_offer_the_same_operations() -> None:
    from chime_client import (
        AsyncBackend,
        AsyncBackendDevice,
        AsyncDeliveryStream,
        AsyncNotificationCenter,
        Backend,
        BackendDevice,
        DeliveryStream,
        NotificationCenter,
    )

    for sync_class, async_class in [(NotificationCenter, AsyncNotificationCenter), (Backend, AsyncBackend),
                                    (BackendDevice, AsyncBackendDevice), (DeliveryStream, AsyncDeliveryStream)]:
        sync, aio = public_methods(sync_class), public_methods(async_class)
        assert sync == aio, sync_class
        for name in aio.keys() - {"deliveries", "device"}:
            assert inspect.iscoroutinefunction(getattr(async_class, name)), (async_class, name)


def test_a_backends_device_has_every_operation_of_a_center() -> None:
    from chime_client import BackendDevice, NotificationCenter

    center, handle = public_methods(NotificationCenter), public_methods(BackendDevice)
    connection = {"connect", "close", "next_delivery"}  # a center's own connection and queue
    assert center.keys() - handle.keys() == connection
    assert handle.keys() - center.keys() == set()
    for name in center.keys() - connection - {"deliveries"}:
        assert handle[name] == center[name], name
    # A handle's deliveries are a stream of the backend's, bounded: one parameter more.
    assert handle["deliveries"] == [*center["deliveries"], "max_queued"]
    # One implementation of the operations: the center and the handle inherit the same functions.
    for name in center.keys() - connection - {"deliveries"}:
        assert getattr(NotificationCenter, name) is getattr(BackendDevice, name), name


def test_a_badge_past_the_maximum_is_refused_before_it_is_sent() -> None:
    assert Badge.increment(MAX_BADGE).wire() == f"+{MAX_BADGE}"
    assert Badge.to_wire(MAX_BADGE) == MAX_BADGE
    for make in (lambda: Badge.increment(MAX_BADGE + 1), lambda: Badge.decrement(MAX_BADGE + 1),
                 lambda: Badge.to_wire(MAX_BADGE + 1), lambda: Badge.to_wire(-1),
                 lambda: NotificationContent(body="b", badge=MAX_BADGE + 1).wire()):
        with pytest.raises(ValueError, match="badge"):
            make()
    from chime_client import _ops
    with pytest.raises(ValueError, match="badge"):
        next(_ops.ack("f", MAX_BADGE + 1))


@pytest.mark.parametrize(
    ("components", "rule"),
    [
        ({"weekdays": MONDAY_TO_FRIDAY, "hour": 18, "minute": 0},
         "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=18;BYMINUTE=0;BYSECOND=0"),
        ({"weekdays": WEEKEND, "hour": 10}, "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=10;BYMINUTE=0;BYSECOND=0"),
        ({"weekdays": [Weekday.FRIDAY, Weekday.MONDAY, Weekday.WEDNESDAY], "hour": 7, "minute": 30},
         "FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=7;BYMINUTE=30;BYSECOND=0"),
        ({"weekdays": {1, 7}}, "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=0;BYMINUTE=0;BYSECOND=0"),
        ({"weekdays": {2}, "hour": 8}, "FREQ=WEEKLY;BYDAY=MO;BYHOUR=8;BYMINUTE=0;BYSECOND=0"),
        ({"month": 12, "weekdays": MONDAY_TO_FRIDAY, "hour": 9},
         "FREQ=YEARLY;BYMONTH=12;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0;BYSECOND=0"),
        ({"day": 13, "weekdays": {Weekday.FRIDAY, Weekday.MONDAY}},
         "FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=MO,FR;BYHOUR=0;BYMINUTE=0;BYSECOND=0"),
    ],
)
def test_a_set_of_weekdays_is_one_rule(components: dict[str, Any], rule: str) -> None:
    assert CalendarTrigger(**components, repeats=True).rrule() == rule


def test_weekday_set_wire_and_equality() -> None:
    trigger = CalendarTrigger(weekdays=MONDAY_TO_FRIDAY, hour=18, minute=0, repeats=True, time_zone="Europe/Paris")
    assert trigger.wire(NOW) == {"fireDate": "2026-11-30T00:00:00", "timeZone": "Europe/Paris",
                                 "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=18;BYMINUTE=0;BYSECOND=0"}
    # Once: the next Monday-to-Friday 09:00 in Tokyo after the command is sent.
    once = CalendarTrigger(weekdays=MONDAY_TO_FRIDAY, hour=9, time_zone="Asia/Tokyo")
    assert once.wire(NOW) == {"fireDate": "2026-12-01T23:00:31", "timeZone": "Asia/Tokyo",
                              "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0;BYSECOND=0;COUNT=1"}
    same = CalendarTrigger(weekdays=[6, 2, 3, 4, 5], hour=18, minute=0, repeats=True, time_zone="Europe/Paris")
    assert same == trigger and hash(same) == hash(trigger)
    assert same.weekdays == MONDAY_TO_FRIDAY and all(isinstance(d, Weekday) for d in same.weekdays)
    assert [d.rrule for d in sorted(Weekday)] == ["SU", "MO", "TU", "WE", "TH", "FR", "SA"]


@pytest.mark.parametrize("components", [{"weekdays": set()}, {"weekdays": {0}}, {"weekdays": {8}},
                                        {"weekdays": {True}}, {"weekdays": 2}, {"weekdays": "MO"},
                                        {"weekdays": {2}, "weekday": 3}, {"weekdays": {"MO"}}])
def test_weekday_sets_are_checked(components: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="weekday"):
        CalendarTrigger(**components)


PARIS = ZoneInfo("Europe/Paris")


def test_an_aware_date_in_a_zoneinfo_repeats_in_that_zone() -> None:
    nine = datetime(2027, 1, 4, 9, 0, tzinfo=PARIS)
    assert DateTrigger(nine, repeat_interval="day").wire(NOW) == {
        "fireDate": "2027-01-04T08:00:00Z", "timeZone": "Europe/Paris", "repeatInterval": "day"}
    assert DateTrigger(nine, time_zone="Asia/Tokyo").wire(NOW) == {
        "fireDate": "2027-01-04T08:00:00Z", "timeZone": "Asia/Tokyo"}
    assert DateTrigger(nine.astimezone(timezone.utc), repeat_interval="day").wire(NOW) == {
        "fireDate": "2027-01-04T08:00:00Z", "repeatInterval": "day"}  # a fixed offset: UTC, as before
    assert RRuleTrigger("FREQ=WEEKLY;BYDAY=MO,FR", nine).wire(NOW) == {
        "fireDate": "2027-01-04T08:00:00Z", "timeZone": "Europe/Paris", "rrule": "FREQ=WEEKLY;BYDAY=MO,FR"}
    # The second 02:30 of the autumn overlap is a different instant: it stays exact.
    second = datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=PARIS)
    assert DateTrigger(second).wire(NOW)["fireDate"] == "2026-10-25T01:30:00Z"


def test_zones_may_be_given_as_zoneinfo() -> None:
    assert CalendarTrigger(hour=18, repeats=True, time_zone=PARIS).wire(NOW)["timeZone"] == "Europe/Paris"
    assert CalendarTrigger(hour=7, time_zone=ZoneInfo("Asia/Tokyo")).wire(NOW)["fireDate"] == "2026-12-01T23:00:31"
    assert TimeIntervalTrigger(86400, align_to="12:00", time_zone=PARIS).wire(NOW)["timeZone"] == "Europe/Paris"
    assert DateTrigger(datetime(2027, 1, 4, 9, 0), time_zone=PARIS).wire(NOW)["timeZone"] == "Europe/Paris"
    from chime_client import _ops

    assert next(_ops.device({"time_zone": PARIS})).payload == {"timeZone": "Europe/Paris"}
    assert next(_ops.update("r", None, {"time_zone": PARIS})).payload == {"id": "r", "timeZone": "Europe/Paris"}


def test_device_settings_show_instants_on_the_devices_wall_clock() -> None:
    shanghai = DeviceSettings("d", "Asia/Shanghai", 0, None, 0, False, False)
    local = shanghai.local(datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc))
    assert local == datetime(2026, 12, 1, 18, 0, tzinfo=ZoneInfo("Asia/Shanghai"))
    assert local.tzinfo == ZoneInfo("Asia/Shanghai") and shanghai.zone == ZoneInfo("Asia/Shanghai")
    with pytest.raises(ValueError):
        shanghai.local(datetime(2026, 12, 1, 10, 0))
    no_zone = DeviceSettings("d", None, 0, None, 0, False, False)
    assert no_zone.zone is None
    with pytest.raises(ChimeError) as caught:
        no_zone.local(datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc))
    assert caught.value.code == "timezone_required"
    # What the client parses is aware and in UTC.
    assert parse_datetime("2026-12-01T10:00:00Z").tzinfo == timezone.utc
