"""Request round trips on loopback, and TCP_NODELAY on every connection: without it a call waits
for Nagle's algorithm and the peer's delayed ACK, about 40 ms a round trip (and 80 ms when neither
side sets it)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chime_client import AsyncBackend, AsyncNotificationCenter, Backend, NotificationCenter

from .conftest import Chime, free_port, stop, wait_for_port

#: Round trips measured after a warm-up, and the bound on their median: on loopback chimed
#: answers within a millisecond or two; one delayed ACK costs about 40 ms.
ROUND_TRIPS = 20
MEDIAN_BOUND = 0.015


def measure(call: Callable[[], object]) -> list[float]:
    call()  # warm-up: the first call also pays for a connection's first packets
    times = []
    for _ in range(ROUND_TRIPS):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


async def measure_async(call: Callable[[], asyncio.Future[object] | object]) -> list[float]:
    async def once() -> None:
        result = call()
        if asyncio.iscoroutine(result):
            await result

    await once()
    times = []
    for _ in range(ROUND_TRIPS):
        started = time.perf_counter()
        await once()
        times.append(time.perf_counter() - started)
    return times


def check(times: list[float]) -> None:
    assert statistics.median(times) < MEDIAN_BOUND, f"round trips in ms: {[round(t * 1000, 1) for t in times]}"


def has_no_delay(sock: object) -> bool:
    assert isinstance(sock, socket.socket)
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_blocking_round_trips_are_fast(chime: Chime, device_id: str) -> None:
    with NotificationCenter(device_id, port=chime.port, timeout=5) as center:
        assert center._connection is not None and has_no_delay(center._connection.socket())
        check(measure(center.pending_notification_requests))


def test_async_round_trips_are_fast(chime: Chime, device_id: str) -> None:
    async def main() -> list[float]:
        async with AsyncNotificationCenter(device_id, port=chime.port, timeout=5) as center:
            assert center._connection is not None and has_no_delay(center._connection.socket())
            return await measure_async(center.pending_notification_requests)

    check(asyncio.run(main()))


def test_backend_round_trips_are_fast(chime: Chime, device_id: str) -> None:
    with Backend(port=chime.port, timeout=5) as backend:
        connection = backend._backend._connection
        assert connection is not None and has_no_delay(connection.socket())
        check(measure(backend.device(device_id).pending_notification_requests))

    async def main() -> list[float]:
        async with AsyncBackend(port=chime.port, timeout=5) as backend:
            return await measure_async(backend.device(device_id).pending_notification_requests)

    check(asyncio.run(main()))


@pytest.fixture(scope="module")
def tls_broker() -> Iterator[tuple[int, Path]]:
    """A mosquitto with a TLS listener and a self-signed certificate for 127.0.0.1 (no chimed)."""
    with tempfile.TemporaryDirectory(prefix="chime-py-tls-") as tmp:
        yield from _tls_broker(Path(tmp))


def _tls_broker(root: Path) -> Iterator[tuple[int, Path]]:
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out",
                    str(cert)], check=True, capture_output=True)
    # mosquitto started as root reads its files as the user "mosquitto".
    root.chmod(0o755)
    key.chmod(0o644)
    port = free_port()
    config = root / "mosquitto.conf"
    config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                      f"certfile {cert}\nkeyfile {key}\n")
    broker = subprocess.Popen(["mosquitto", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_port(port, broker):
            pytest.fail("the TLS mosquitto did not start")
        yield port, cert
    finally:
        stop(broker)


def test_tls_connections_set_no_delay(tls_broker: tuple[int, Path], device_id: str) -> None:
    port, cert = tls_broker
    context = ssl.create_default_context(cafile=str(cert))
    with NotificationCenter(device_id, port=port, tls=context, timeout=5) as center:
        assert center._connection is not None
        sock = center._connection.socket()
        assert isinstance(sock, ssl.SSLSocket) and has_no_delay(sock)
    with Backend(port=port, tls=context, timeout=5) as backend:
        connection = backend._backend._connection
        assert connection is not None
        sock = connection.socket()
        assert isinstance(sock, ssl.SSLSocket) and has_no_delay(sock)
