"""Backend and AsyncBackend against the real chimed and mosquitto: many devices over one
connection, the window, fan-out and delivery streams."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from chime_client import (
    MAX_WINDOW,
    AsyncBackend,
    Backend,
    ChimeConnectionError,
    ChimeError,
    ChimeTimeoutError,
    Delivery,
    DeviceResult,
    ErrorCode,
    NotificationContent,
    NotificationRequest,
    ScheduledNotification,
    TimeIntervalTrigger,
)

from .conftest import Chime, Spy

#: Devices served over one connection in the large tests.
MANY = 2000


def devices(count: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"bk-{run}-{i}" for i in range(count)]


def campaign(after: float = 3600, identifier: str = "promo") -> NotificationRequest:
    return NotificationRequest(identifier, NotificationContent(body="20% off", user_info={"campaign": "winter"}),
                               TimeIntervalTrigger(after))


def assert_scheduled(results: dict[str, DeviceResult[list[ScheduledNotification]]], ids: list[str]) -> None:
    assert list(results) == ids
    failed = {d: r.error for d, r in results.items() if not r.ok}
    assert failed == {}
    soon = datetime.now(timezone.utc) + timedelta(hours=2)
    for device_id, result in results.items():
        [scheduled] = result.result()
        assert scheduled.identifier == "promo" and result.device_id == device_id
        assert scheduled.next_fire_date is not None and scheduled.next_fire_date < soon


def test_thousands_of_devices_over_one_connection(chime: Chime) -> None:
    ids = devices(MANY)
    with Spy(chime.port, "chime/+/cmd/#", "chime/+/replies/#") as spy:
        with Backend(port=chime.port, window=64, timeout=10) as backend:
            started = time.monotonic()
            results = backend.schedule_many(ids, [campaign()])
            elapsed = time.monotonic() - started
            assert_scheduled(results, ids)
            assert backend.in_flight == 0
            for device_id in ids[::250]:
                [pending] = backend.device(device_id).pending_notification_requests()
                assert pending.identifier == "promo" and pending.content.user_info == {"campaign": "winter"}
                assert pending.next_fire_date == results[device_id].result()[0].next_fire_date
        assert spy.wait_until(lambda s: len(s.commands()) >= MANY + len(ids[::250]))
    commands = spy.commands()
    # One connection: every command asked for its reply under its own device, with one suffix.
    suffixes = {c.response_topic.rsplit("/", 1)[1] for c in commands if c.response_topic}
    assert len(suffixes) == 1 and suffixes.pop().startswith("bk-")
    assert all(c.response_topic == f"chime/{c.topic.split('/')[1]}/replies/{c.response_topic.rsplit('/', 1)[1]}"
               for c in commands if c.response_topic)
    assert {c.topic.split("/")[1] for c in commands} == set(ids)
    # The window was kept full, never overfilled.
    assert 32 <= spy.max_in_flight <= 64, spy.max_in_flight
    print(f"{MANY} devices in {elapsed:.2f} s, at most {spy.max_in_flight} in flight")


def test_async_thousands_of_devices_over_one_connection(chime: Chime) -> None:
    ids = devices(MANY)

    async def main(spy: Spy) -> None:
        async with AsyncBackend(port=chime.port, window=100, timeout=10) as backend:
            results = await backend.schedule_many(ids, [campaign()])
            assert_scheduled(results, ids)
            listed = await asyncio.gather(*(backend.device(d).pending_notification_requests() for d in ids[::100]))
            assert [[p.identifier for p in pending] for pending in listed] == [["promo"]] * len(ids[::100])
            assert backend.in_flight == 0

    with Spy(chime.port, "chime/+/cmd/#", "chime/+/replies/#") as spy:
        asyncio.run(main(spy))
    assert 50 <= spy.max_in_flight <= 100, spy.max_in_flight


def test_a_tiny_window_applies_back_pressure_to_every_caller(chime: Chime) -> None:
    ids = devices(120)
    with Spy(chime.port, "chime/+/cmd/#", "chime/+/replies/#") as spy:
        with Backend(port=chime.port, window=2, timeout=10) as backend:
            assert_scheduled(backend.schedule_many(ids[:60], [campaign()]), ids[:60])
            # Eight threads calling at once wait for the two places in turn; none fails.
            errors: list[BaseException] = []

            def add(some: list[str]) -> None:
                try:
                    for device_id in some:
                        backend.device(device_id).add(campaign())
                except BaseException as error:
                    errors.append(error)

            threads = [threading.Thread(target=add, args=(ids[60 + i::8],)) for i in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert errors == []
            assert all(backend.device(d).device_settings().pending == 1 for d in ids)
    assert spy.max_in_flight == 2


def test_async_callers_past_the_window_await_their_turn(chime: Chime) -> None:
    ids = devices(40)

    async def main() -> None:
        async with AsyncBackend(port=chime.port, window=3, timeout=10) as backend:
            seen: list[int] = []

            async def add(device_id: str) -> None:
                seen.append(backend.in_flight)
                await backend.device(device_id).add(campaign())

            await asyncio.gather(*(add(d) for d in ids))
            assert max(seen) == 3 and backend.in_flight == 0
            counts = await asyncio.gather(*(backend.device(d).device_settings() for d in ids))
            assert [c.pending for c in counts] == [1] * len(ids)

    with Spy(chime.port, "chime/+/cmd/#", "chime/+/replies/#") as spy:
        asyncio.run(main())
    assert spy.max_in_flight == 3


def test_fan_out_reports_each_device_and_one_failure_stops_none(chime: Chime) -> None:
    ok = devices(4)
    full = f"full-{uuid.uuid4().hex[:8]}"
    ids = [ok[0], "bad id/with+wildcards", ok[1], full, ok[2], ok[3]]
    with Backend(port=chime.port, window=4, timeout=10) as backend:
        # chimed's default --max-pending-per-device is 1000: fill one device.
        backend.device(full).add_all([campaign(identifier=f"n{i}") for i in range(1000)])
        results = backend.schedule_many(ids, [campaign(), campaign(7200, "second")])
        assert list(results) == ids
        assert [results[d].ok for d in ids] == [True, False, True, False, True, True]
        bad = results["bad id/with+wildcards"].error
        assert isinstance(bad, ChimeError) and (bad.code, bad.field) == (ErrorCode.INVALID_ARGUMENT, "deviceId")
        quota = results[full].error
        assert isinstance(quota, ChimeError) and quota.code == ErrorCode.QUOTA_EXCEEDED and quota.op == "schedule"
        with pytest.raises(ChimeError) as raised:
            results[full].result()
        assert raised.value is quota
        for device_id in ok:
            assert [s.identifier for s in results[device_id].result()] == ["promo", "second"]
            assert [p.identifier for p in backend.device(device_id).pending_notification_requests()] == [
                "promo", "second"]
        assert backend.device(full).device_settings().pending == 1000

        # Each device's own requests; one that cannot be built fails alone.
        def personal(device_id: str) -> list[NotificationRequest]:
            if device_id == ok[1]:
                return []
            return [NotificationRequest("hello", NotificationContent(body=f"Hello {device_id}"),
                                        TimeIntervalTrigger(600))]

        personal_results = backend.schedule_many(ok, personal, replacing=["promo"])
        assert [personal_results[d].ok for d in ok] == [True, False, True, True]
        assert isinstance(personal_results[ok[1]].error, ValueError)
        pending = {p.identifier: p for p in backend.device(ok[0]).pending_notification_requests()}
        assert set(pending) == {"hello", "second"} and pending["hello"].content.body == f"Hello {ok[0]}"
        assert len(backend.device(ok[1]).pending_notification_requests()) == 2  # nothing was sent


def test_schedule_many_refuses_what_cannot_be_sent(chime: Chime) -> None:
    with pytest.raises(ValueError, match="window"):
        Backend(window=0)
    with pytest.raises(ValueError, match="window"):
        AsyncBackend(window=MAX_WINDOW + 1)
    with Backend(port=chime.port, timeout=5) as backend:
        with pytest.raises(ValueError, match="named twice"):
            backend.schedule_many(["a", "b", "a"], [campaign()])
        with pytest.raises(ValueError, match="1 to 1000"):
            backend.schedule_many(["a"], [])
        with pytest.raises(ValueError, match="1 to 1000"):
            backend.schedule_many(["a"], [campaign(identifier=f"n{i}") for i in range(1001)])
        with pytest.raises(ValueError, match="device id"):
            backend.device("no/slashes")
        assert backend.schedule_many([], [campaign()]) == {}
    with pytest.raises(ChimeConnectionError):
        backend.device("a").device_settings()


def test_backend_timeouts_resend_the_same_bytes(chime: Chime) -> None:
    device_id = f"silent-{uuid.uuid4().hex[:8]}"
    with Spy(chime.port, "silent/#") as spy:
        # No chimed serves the prefix "silent": nothing answers.
        with Backend(port=chime.port, topic_prefix="silent", timeout=0.3, retries=1) as backend:
            started = time.monotonic()
            with pytest.raises(ChimeTimeoutError) as caught:
                backend.device(device_id).add(campaign())
            assert time.monotonic() - started >= 0.55 and caught.value.op == "schedule"
            results = backend.schedule_many([device_id, "other"], [campaign()], retries=0)
            assert all(isinstance(r.error, ChimeTimeoutError) for r in results.values())
            assert backend.in_flight == 0
        assert spy.wait_until(lambda s: len(s.commands()) >= 4)
    first, second = spy.commands()[:2]
    assert (first.payload, first.correlation, first.response_topic) == (
        second.payload, second.correlation, second.response_topic)
    assert first.correlation is not None and json.loads(first.payload)["requestId"] == first.correlation.decode()
    assert first.response_topic is not None and first.response_topic.startswith(f"silent/{device_id}/replies/bk-")


def by_device(deliveries: list[Delivery]) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    for delivery in deliveries:
        got.setdefault(delivery.device_id, []).append(delivery.identifier)
    return got


def test_delivery_streams_for_a_set_and_for_every_device(chime: Chime) -> None:
    a, b, c = devices(3)
    with Backend(port=chime.port, timeout=5) as backend:
        with backend.deliveries() as every, backend.deliveries([a, b]) as some, backend.device(a).deliveries() as one:
            backend.schedule_many([a, b, c], [campaign(0.5, "soon")])
            # The positive control: the stream of every device gets all three (and other tests' none).
            got = [every.next(10)]
            while {d.device_id for d in got} != {a, b, c}:
                got.append(every.next(10))
            assert by_device([d for d in got if d.device_id in (a, b, c)]) == {a: ["soon"], b: ["soon"], c: ["soon"]}
            assert by_device([some.next(5), some.next(5)]) == {a: ["soon"], b: ["soon"]}
            assert by_device([one.next(5)]) == {a: ["soon"]}
            # Each stream got each delivery once, though the broker matched two subscriptions.
            with pytest.raises(ChimeTimeoutError):
                some.next(0.3)
            with pytest.raises(ChimeTimeoutError):
                one.next(0.1)
        assert some.dropped == 0
        # A closed stream ends; iteration with idle_timeout ends on its own.
        assert list(some) == []
        assert list(backend.deliveries([a], idle_timeout=0.2)) == []


def test_a_stream_that_is_not_read_drops_past_its_bound(chime: Chime) -> None:
    [device_id] = devices(1)
    with Backend(port=chime.port, timeout=5) as backend:
        with backend.deliveries([device_id]) as control, backend.deliveries([device_id], max_queued=2) as bounded:
            backend.device(device_id).add_all([campaign(0.3 + i * 0.05, f"n{i}") for i in range(5)])
            assert sorted(control.next(10).identifier for _ in range(5)) == [f"n{i}" for i in range(5)]
            assert [bounded.next(1).identifier for _ in range(2)] == ["n0", "n1"]
            assert bounded.dropped == 3
            with pytest.raises(ChimeTimeoutError):
                bounded.next(0.2)
        with pytest.raises(ValueError, match="max_queued"):
            backend.deliveries([device_id], max_queued=0)
        with pytest.raises(ValueError, match="at least one device"):
            backend.deliveries([])


def test_async_delivery_streams(chime: Chime) -> None:
    a, b, c = devices(3)

    async def main() -> None:
        async with AsyncBackend(port=chime.port, timeout=5) as backend:
            async with backend.deliveries() as every, backend.deliveries([a, c]) as some:
                results = await backend.schedule_many([a, b, c], [campaign(0.5, "soon")])
                assert all(r.ok for r in results.values())
                got: list[Delivery] = []
                async for delivery in every:
                    got.append(delivery)
                    if {d.device_id for d in got} >= {a, b, c}:
                        break
                assert by_device([await some.next(5), await some.next(5)]) == {a: ["soon"], c: ["soon"]}
                with pytest.raises(ChimeTimeoutError):
                    await some.next(0.3)
            stream = backend.device(b).deliveries(idle_timeout=0.2)
            assert [d async for d in stream] == []
        with pytest.raises(ChimeConnectionError):
            backend.deliveries()

    asyncio.run(main())


def test_closing_the_backend_ends_streams_and_waiting_calls(chime: Chime) -> None:
    [device_id] = devices(1)
    # No chimed serves the prefix "silent": calls wait for replies that never come.
    backend = Backend(port=chime.port, topic_prefix="silent", window=1, timeout=30).connect()
    stream = backend.deliveries([device_id])
    outcomes: list[Any] = []
    lock = threading.Lock()

    def read() -> None:
        rest = list(stream)
        with lock:
            outcomes.append(("stream", rest))

    def call() -> None:
        try:
            backend.device(device_id).device_settings()
        except ChimeError as error:
            with lock:
                outcomes.append(("call", error))

    threads = [threading.Thread(target=read), threading.Thread(target=call), threading.Thread(target=call)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while backend.in_flight < 1 and time.monotonic() < deadline:  # one sent, one waiting for the window
        time.sleep(0.01)
    assert backend.in_flight == 1
    started = time.monotonic()
    backend.close()
    for thread in threads:
        thread.join(5)
    assert time.monotonic() - started < 5
    assert sorted(kind for kind, _ in outcomes) == ["call", "call", "stream"]
    assert all(isinstance(error, ChimeConnectionError) for kind, error in outcomes if kind == "call")
    assert [rest for kind, rest in outcomes if kind == "stream"] == [[]]
    with pytest.raises(ChimeConnectionError):
        stream.next(0.1)
    with pytest.raises(ChimeConnectionError):
        backend.device(device_id).device_settings()
