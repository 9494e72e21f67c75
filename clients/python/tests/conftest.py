"""A real mosquitto on a free loopback port and the real chimed on it, for the whole session."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from chime_client import NotificationCenter

REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Chime:
    """The broker's port and chimed's log."""

    port: int
    data_dir: Path
    lines: list[str] = field(default_factory=list)

    @property
    def log(self) -> str:
        return "\n".join(self.lines)


@dataclass(frozen=True)
class Seen:
    """A message the spy saw."""

    topic: str
    payload: bytes
    correlation: bytes | None
    response_topic: str | None


class Spy:
    """An MQTT 5 client that records every message on ``filters`` (QoS 1, in the order the broker
    sends them) and counts the commands in flight: those whose Correlation Data it saw on a
    ``/cmd/`` topic and not yet on a ``/replies/`` one."""

    def __init__(self, port: int, *filters: str) -> None:
        self.seen: list[Seen] = []
        self.max_in_flight = 0
        self._in_flight: set[bytes] = set()
        self._lock = threading.RLock()
        self._port = port
        self._filters = filters
        self._subscribed = threading.Event()
        self._client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5)
        self._client.on_connect = lambda client, *_: client.subscribe([(f, 1) for f in self._filters])
        self._client.on_subscribe = lambda *_: self._subscribed.set()
        self._client.on_message = self._record

    def __enter__(self) -> Spy:
        self._client.connect("127.0.0.1", self._port)
        self._client.loop_start()
        assert self._subscribed.wait(10), "the spy did not subscribe"
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._client.disconnect()
        self._client.loop_stop()

    def _record(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        seen = Seen(message.topic, bytes(message.payload), getattr(message.properties, "CorrelationData", None),
                    getattr(message.properties, "ResponseTopic", None))
        with self._lock:
            self.seen.append(seen)
            if seen.correlation is not None and "/cmd/" in seen.topic:
                self._in_flight.add(seen.correlation)
                self.max_in_flight = max(self.max_in_flight, len(self._in_flight))
            elif seen.correlation is not None and "/replies/" in seen.topic:
                self._in_flight.discard(seen.correlation)

    def commands(self) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if "/cmd/" in s.topic]

    def wait_until(self, condition: Any, timeout: float = 10.0) -> bool:
        """Whether ``condition(self)`` became true within ``timeout`` seconds (polled)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if condition(self):
                    return True
            time.sleep(0.02)  # polling a condition, not waiting for time
        return False


@pytest.fixture(scope="session")
def chime() -> Iterator[Chime]:
    chimed = os.environ.get("CHIMED", str(REPO / ".build" / "debug" / "chimed"))
    if not os.access(chimed, os.X_OK):
        pytest.fail(f"chimed is not built at {chimed}: run `swift build` in the repository root or set CHIMED")
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    with tempfile.TemporaryDirectory(prefix="chime-py-") as tmp:
        root = Path(tmp)
        broker: subprocess.Popen[bytes] | None = None
        for _ in range(5):  # another process may take the free port first
            port = free_port()
            config = root / "mosquitto.conf"
            # As deploy/mosquitto: the broker's side of a round trip without Nagle's delay too.
            config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                              "set_tcp_nodelay true\n")
            broker = subprocess.Popen([mosquitto, "-c", str(config)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            if wait_for_port(port, broker):
                break
            stop(broker)
            broker = None
        if broker is None:
            pytest.fail("mosquitto did not start")
        state = Chime(port, root / "data")
        worker = subprocess.Popen(
            [chimed, "--broker", f"mqtt://127.0.0.1:{port}", "--data-dir", str(state.data_dir), "--worker-id",
             f"py-{uuid.uuid4().hex[:8]}", "--min-repeat-seconds", "1", "--log-level", "debug"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        serving = threading.Event()

        def read() -> None:
            assert worker.stderr is not None
            for raw in worker.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                state.lines.append(line)
                if " serving " in line:
                    serving.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            if not serving.wait(30):
                pytest.fail(f"chimed did not start serving:\n{state.log}")
            yield state
        finally:
            stop(worker)
            stop(broker)
            reader.join(5)


@pytest.fixture
def device_id() -> str:
    return f"py-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def center(chime: Chime, device_id: str) -> Iterator[NotificationCenter]:
    with NotificationCenter(device_id, "127.0.0.1", chime.port, timeout=5) as c:
        yield c
