"""The console in a real browser: headless Chromium (Debian's chromium and chromium-driver, driven by
selenium) against a real mosquitto, chimed and `chime console`, used as a person uses it (typing
into labelled fields, ticking boxes, pressing buttons), with the server's refusals checked by
requests of our own. `scripts/test-console-browser` runs it; `make test` runs that.

The session's world: mosquitto on a free loopback port, chimed (`--worker-id w1`), the console on a
free port with an operator `ana` and a viewer `vic`, and device phone-1 (Asia/Shanghai, receipts on)
with the Monday-to-Friday 18:00 reminder `pill`, whose body is hostile HTML, and a one-shot `hello`
that fired a few seconds after it was scheduled and was acknowledged, so that the history shows an
outcome; and phone-2 and tablet-1, each with a notification `promo` tagged campaign=spring, for
finding devices across the fleet and editing.
"""

from __future__ import annotations

import datetime
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from selenium import webdriver
from selenium.common.exceptions import (NoAlertPresentException, NoSuchElementException,
                                        StaleElementReferenceException)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

REPO = Path(__file__).resolve().parents[2]
# The screenshots go to a scratch directory; with CHIME_UPDATE_SCREENSHOTS=1 to docs/images, the ones
# docs/console.md and README.md show (so that a test run leaves the tree as it was).
IMAGES = (
    REPO / "docs" / "images"
    if os.environ.get("CHIME_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="chime-console-shots-"))
)
DEVICE = "phone-1"
TAGGED = ["phone-2", "tablet-1"]  # each with `promo`, userInfo campaign=spring
PROMO_BODY = "Spring sale"
HOSTILE = "<script>alert(1)</script>"
PILL_BODY = f"{HOSTILE} Take your medicine"
PASSWORDS = {"ana": "a long passphrase", "vic": "viewer words"}
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
NEXT_TIMES = 5  # the next occurrences the device page shows of each notification
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def executable(variable: str, default: str) -> str:
    path = os.environ.get(variable) or str(REPO / ".build" / "debug" / default)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{default} is not built at {path}: run `swift build` in the repository root or set {variable}")
    return str(Path(path).resolve())


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


def eventually(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.25) -> Any:
    """`condition()`'s first true value within `timeout` seconds (polled), else a failure saying `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s: {what}")
        time.sleep(every)


class Lines:
    """The lines a child process writes on one of its pipes, read by a thread of their own."""

    def __init__(self, pipe: Any) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: Any) -> None:
        for raw in pipe:
            with self._lock:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def join(self) -> None:
        self._thread.join(5)


@dataclass
class World:
    chime: str
    env: dict[str, str]
    url: str
    audit: Lines
    files: Path

    def run(self, *arguments: str, stdin: str | None = None) -> str:
        done = subprocess.run([self.chime, *arguments], env=self.env, input=stdin, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"chime {' '.join(arguments)}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        return done.stdout

    def json_lines(self, *arguments: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.run(*arguments, "--json").splitlines() if line.strip()]

    def notification(self, nid: str, device: str = DEVICE) -> dict[str, Any] | None:
        return next((n for n in self.json_lines("list", "--device", device) if n["id"] == nid), None)

    def audit_entries(self) -> list[dict[str, Any]]:
        entries = []
        for line in self.audit.snapshot():
            try:
                entries.append(json.loads(line))
            except ValueError:
                pass
        return entries


@pytest.fixture(scope="session")
def world() -> Iterator[World]:
    chime = executable("CHIME", "chime")
    chimed = executable("CHIMED", "chimed")
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    processes: list[subprocess.Popen[bytes]] = []
    readers: list[Lines] = []
    with tempfile.TemporaryDirectory(prefix="chime-console-browser-") as tmp:
        root = Path(tmp)
        try:
            port = 0
            for _ in range(5):  # another process may take the free port first
                port = free_port()
                config = root / "mosquitto.conf"
                config.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                                  "set_tcp_nodelay true\n")
                broker = subprocess.Popen([mosquitto, "-c", str(config)], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                if wait_for_port(port, broker):
                    processes.append(broker)
                    break
                stop(broker)
            else:
                pytest.fail("mosquitto did not start")
            broker_url = f"mqtt://127.0.0.1:{port}"
            worker = subprocess.Popen(
                [chimed, "--broker", broker_url, "--data-dir", str(root / "data"), "--worker-id", "w1",
                 "--stats-interval", "1"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            processes.append(worker)
            worker_log = Lines(worker.stderr)
            readers.append(worker_log)
            eventually(lambda: any(" serving " in line for line in worker_log.snapshot()) or worker.poll() is not None,
                       30, "chimed serving")
            assert worker.poll() is None, "chimed exited:\n" + "\n".join(worker_log.snapshot())

            env = {**os.environ, "CHIME_BROKER": broker_url}
            accounts = root / "console.passwd"
            world = World(chime, env, "", Lines([]), root)
            world.run("console", "add", "ana", "--role", "operator", "--accounts", str(accounts),
                      stdin=PASSWORDS["ana"] + "\n")
            world.run("console", "add", "vic", "--role", "viewer", "--accounts", str(accounts),
                      stdin=PASSWORDS["vic"] + "\n")

            world.run("device", "--device", DEVICE, "--tz", "Asia/Shanghai", "--receipts", "on")
            world.run("schedule", "--device", DEVICE, "--id", "pill", "--at", "18:00", "--on", "weekdays",
                      "--tz", "Asia/Shanghai", "--body", PILL_BODY)
            world.run("schedule", "--device", DEVICE, "--id", "hello", "--in", "2s", "--body", "Hello from Chime")
            fired = eventually(
                lambda: [h for h in world.json_lines("history", "--device", DEVICE) if h["id"] == "hello"],
                30, "hello in chime history", every=0.5)
            world.run("ack", "--device", DEVICE, fired[0]["fireId"])
            for device in TAGGED:
                world.run("schedule", "--device", device, "--id", "promo", "--in", "1d", "--body", PROMO_BODY,
                          "--info", "campaign=spring")

            console = subprocess.Popen(
                [chime, "console", "--listen", "127.0.0.1:0", "--accounts", str(accounts), "--broker", broker_url],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            processes.append(console)
            world.audit = Lines(console.stdout)
            console_log = Lines(console.stderr)
            readers += [world.audit, console_log]
            serving = eventually(
                lambda: next((line for line in console_log.snapshot() if "serving on " in line), None)
                or console.poll() is not None, 20, "the console serving")
            assert console.poll() is None, "the console exited:\n" + "\n".join(console_log.snapshot())
            world.url = next(word for word in str(serving).split() if word.startswith("http://"))
            yield world
        finally:
            for process in reversed(processes):
                stop(process)
            for reader in readers:
                reader.join()


def new_browser() -> WebDriver:
    options = Options()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,900", "--hide-scrollbars", "--force-device-scale-factor=1"]:
        options.add_argument(argument)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager look for a driver online
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    return driver


def labelled(driver: WebDriver, label: str) -> WebElement:
    """The control that the label reading `label` names (as a screen reader finds it)."""
    element = driver.find_element(By.XPATH, f"//label[normalize-space()='{label}']")
    return driver.find_element(By.ID, element.get_attribute("for") or "")


def button(driver: WebDriver, text: str) -> WebElement:
    return driver.find_element(By.XPATH, f"//button[normalize-space()='{text}']")


def wait_for_path(driver: WebDriver, path: str) -> None:
    WebDriverWait(driver, 20).until(lambda d: urllib.parse.urlsplit(d.current_url).path == path,
                                    f"{path}, at {driver.current_url}")


def heading(driver: WebDriver) -> str:
    return driver.find_element(By.TAG_NAME, "h1").text


def wait_for_heading(driver: WebDriver, text: str) -> None:
    """Waits for the page headed `text` (after a form whose answer has the same address)."""
    WebDriverWait(driver, 20, ignored_exceptions=[NoSuchElementException, StaleElementReferenceException]).until(
        lambda d: heading(d) == text, f"the page {text!r}")


def sign_in(driver: WebDriver, world: World, name: str) -> None:
    """Types the name and password into the sign-in form and presses the button."""
    driver.get(world.url + "/login")
    labelled(driver, "User name").send_keys(name)
    password = labelled(driver, "Password")
    password.send_keys(PASSWORDS[name])
    button(driver, "Sign in").click()
    wait_for_path(driver, "/fleet")
    assert f"Signed in as {name}" in driver.find_element(By.CSS_SELECTOR, ".account").text


def open_device(driver: WebDriver) -> None:
    """Find, the device id typed, Enter pressed: the device's page."""
    driver.find_element(By.LINK_TEXT, "Find").click()
    wait_for_path(driver, "/find")
    field = labelled(driver, "Device id")
    field.clear()
    field.send_keys(DEVICE, Keys.ENTER)
    wait_for_path(driver, f"/device/{DEVICE}")


def row(driver: WebDriver, section: str, nid: str) -> WebElement:
    """The row of notification `nid` in the table of the section headed `section`."""
    return driver.find_element(
        By.XPATH,
        f"//div[@aria-labelledby='{section}']//tr[td[@data-label='Notification']//code[normalize-space()='{nid}']]")


def cell(tr: WebElement, label: str) -> WebElement:
    return tr.find_element(By.CSS_SELECTOR, f"td[data-label='{label}']")


def size(driver: WebDriver, width: int, height: int) -> None:
    """A viewport (the page's window, without the browser's own bars) of `width` by `height`."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    if inner != [width, height]:  # the window's size counts the browser's bars, even headless
        driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])
        inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    assert inner == [width, height], f"the viewport is {inner}, not {width}x{height}"


def assert_no_horizontal_scroll(driver: WebDriver) -> None:
    widths = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[2] and widths[1] <= widths[2], \
        f"{driver.current_url} scrolls sideways at {widths[2]} px: scrollWidth {widths[0]} (body {widths[1]})"


@dataclass
class Session:
    cookie: str
    csrf: str


def session_of(driver: WebDriver) -> Session:
    """The browser's session cookie and the CSRF token of its pages' forms (the sign-out form)."""
    cookie = driver.get_cookie("__Host-chime_console")
    assert cookie is not None, f"no session cookie: {driver.get_cookies()}"
    csrf = driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value") or ""
    assert len(csrf) >= 16
    return Session(f"__Host-chime_console={cookie['value']}", csrf)


def post(world: World, path: str, fields: list[tuple[str, str]], session: Session | None,
         origin: str | None) -> tuple[int, str]:
    """A form posted by a program of our own (not the page): the status and the body."""
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if session is not None:
        headers["Cookie"] = session.cookie
    if origin is not None:
        headers["Origin"] = origin
    request = urllib.request.Request(world.url + path, data=urllib.parse.urlencode(fields).encode(),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def expected_reminders(count: int) -> list[datetime.datetime]:
    """The next `count` weekdays at 18:00 in Shanghai after now."""
    zone = ZoneInfo("Asia/Shanghai")
    now = datetime.datetime.now(zone)
    day = now.date()
    dates: list[datetime.datetime] = []
    while len(dates) < count:
        at = datetime.datetime.combine(day, datetime.time(18, 0), zone)
        if at.weekday() < 5 and at > now:
            dates.append(at)
        day += datetime.timedelta(days=1)
    return dates


@pytest.fixture(scope="session")
def ana(world: World) -> Iterator[WebDriver]:
    """The operator's browser, signed in."""
    driver = new_browser()
    try:
        sign_in(driver, world, "ana")
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def vic(world: World) -> Iterator[WebDriver]:
    """The viewer's browser (a session of its own), signed in."""
    driver = new_browser()
    try:
        sign_in(driver, world, "vic")
        yield driver
    finally:
        driver.quit()


def test_signing_in_through_the_form_lands_on_the_fleet_with_worker_w1(world: World, ana: WebDriver) -> None:
    button(ana, "Sign out").click()
    wait_for_path(ana, "/login")
    ana.get(world.url + f"/device/{DEVICE}")
    wait_for_path(ana, "/login")  # signed out: every page sends here

    labelled(ana, "User name").send_keys("ana")
    labelled(ana, "Password").send_keys("not the passphrase", Keys.ENTER)
    alert = WebDriverWait(ana, 20).until(lambda d: d.find_elements(By.ID, "login-error"))
    assert alert[0].text == "Wrong name or password."
    assert urllib.parse.urlsplit(ana.current_url).path == "/login"

    sign_in(ana, world, "ana")
    assert heading(ana) == "Fleet"

    def worker_row() -> bool:
        ana.refresh()
        return bool(ana.find_elements(By.XPATH, "//th[@scope='row'][normalize-space()='w1']"))

    eventually(worker_row, 20, "worker w1 on the fleet page", every=1)
    assert any(entry.get("action") == "sign-in" and entry.get("who") == "ana" and entry.get("outcome") == "refused"
               for entry in world.audit_entries())


def test_find_shows_the_reminder_in_words_its_next_five_dates_and_the_hostile_body_as_text(
        world: World, ana: WebDriver) -> None:
    open_device(ana)
    assert heading(ana) == f"Device {DEVICE}"
    pill = row(ana, "notifications-heading", "pill")
    assert cell(pill, "Schedule").text.strip() == "Monday to Friday at 18:00, Asia/Shanghai"
    assert cell(pill, "State").text.strip() == "On"

    times = cell(pill, "Next occurrences").find_elements(By.CSS_SELECTOR, "ol.times > li")
    expected = expected_reminders(NEXT_TIMES)
    assert len(times) == NEXT_TIMES, [t.text for t in times]
    for item, at in zip(times, expected):
        words = f"{WEEKDAYS[at.weekday()]} {at.day} {MONTHS[at.month - 1]} {at.year} 18:00 (Asia/Shanghai)"
        assert item.text.startswith(words), f"{item.text!r} is not {words!r}"
        utc = item.find_element(By.TAG_NAME, "time").get_attribute("datetime") or ""
        assert datetime.datetime.fromisoformat(utc) == at, f"{utc} is not {at}"
        assert item.text.endswith(f"{at.astimezone(datetime.timezone.utc):%H:%M} UTC"), item.text

    # The body is shown as the text it is: the page has no script element, and none ran.
    assert HOSTILE in cell(pill, "Notification").text
    assert PILL_BODY in ana.find_element(By.TAG_NAME, "body").text
    assert ana.execute_script("return document.getElementsByTagName('script').length") == 0
    with pytest.raises(NoAlertPresentException):
        ana.switch_to.alert.text


def test_the_history_shows_that_the_one_shot_reached_the_device(world: World, ana: WebDriver) -> None:
    ana.get(world.url + f"/device/{DEVICE}")
    assert ana.find_element(By.ID, "history-heading").text == "Delivery history (1)"
    hello = row(ana, "history-heading", "hello")
    outcome = cell(hello, "What happened").text
    assert outcome.startswith("Reached the device: acknowledged "), outcome
    assert "The broker accepted it." in outcome
    assert cell(hello, "Push").text == "not pushed"
    assert "(on time)" in cell(hello, "Sent").text
    assert ana.find_element(By.ID, "inbox-heading").text == "Inbox (0)"


def test_an_operator_pauses_the_reminder_after_confirming(world: World, ana: WebDriver) -> None:
    assert world.notification("pill")["enabled"] is True  # type: ignore[index]
    try:
        ana.get(world.url + f"/device/{DEVICE}")
        box = ana.find_element(By.CSS_SELECTOR, "input[type=checkbox][name=ids][value=pill]")
        box.click()
        assert box.is_selected()
        button(ana, "Pause").click()
        wait_for_path(ana, f"/device/{DEVICE}/act")
        wait_for_heading(ana, "Pause notifications")
        assert f"Pause 1 notification of device {DEVICE}?" in ana.find_element(By.TAG_NAME, "main").text
        assert world.notification("pill")["enabled"] is True, "paused before confirming"  # type: ignore[index]

        button(ana, "Pause 1 notification").click()
        wait_for_heading(ana, "Paused 1 notification")
        assert f"Done on device {DEVICE}." in ana.find_element(By.CSS_SELECTOR, "[role=status]").text

        assert world.notification("pill")["enabled"] is False  # type: ignore[index]
        eventually(lambda: [e for e in world.audit_entries()
                            if e.get("who") == "ana" and e.get("action") == "pause" and e.get("device") == DEVICE
                            and e.get("ids") == ["pill"] and e.get("outcome") == "ok"
                            and e.get("role") == "operator"],
                   5, "the audit line of ana's pause")

        ana.find_element(By.LINK_TEXT, f"Back to device {DEVICE}").click()
        wait_for_path(ana, f"/device/{DEVICE}")
        assert cell(row(ana, "notifications-heading", "pill"), "State").text == "Paused"
    finally:
        world.run("resume", "--device", DEVICE, "--id", "pill")
    assert world.notification("pill")["enabled"] is True  # type: ignore[index]


def test_a_viewer_has_no_controls_and_the_server_refuses_a_forged_action(world: World, vic: WebDriver) -> None:
    open_device(vic)
    assert "Signed in as vic (viewer)" in vic.find_element(By.CSS_SELECTOR, ".account").text
    row(vic, "notifications-heading", "pill")  # the viewer reads the reminder...
    assert vic.find_elements(By.CSS_SELECTOR, "input[name=ids]") == []  # ...but has nothing to act with
    assert vic.find_elements(By.CSS_SELECTOR, "form[action$='/act']") == []
    assert vic.find_elements(By.XPATH, "//button[normalize-space()='Pause' or normalize-space()='Cancel']") == []

    # The viewer's own session, cookie and token, in a request of our own: the server refuses it.
    session = session_of(vic)
    before = world.notification("pill")
    status, body = post(world, f"/device/{DEVICE}/act",
                        [("action", "cancel"), ("ids", "pill"), ("csrf", session.csrf), ("confirm", "yes")],
                        session, world.url)
    assert status == 403, body
    assert "viewer" in body
    status, body = post(world, f"/device/{DEVICE}/act",
                        [("action", "pause"), ("ids", "pill"), ("csrf", session.csrf), ("confirm", "yes")],
                        session, world.url)
    assert status == 403, body
    assert world.notification("pill") == before, "the viewer's forged actions changed the reminder"
    assert [e for e in world.audit_entries()
            if e.get("who") == "vic" and e.get("action") == "cancel" and e.get("outcome") == "forbidden"]
    # The same request without the action's confirmation is refused too (no confirmation page).
    status, body = post(world, f"/device/{DEVICE}/act", [("action", "pause"), ("ids", "pill"),
                                                         ("csrf", session.csrf)], session, world.url)
    assert status == 403 and 'name="confirm"' not in body, body


def list_devices(driver: WebDriver, device: str, key: str = "", value: str = "") -> list[str]:
    """Find, the fields filled in, List devices pressed: the devices found, in the order shown."""
    driver.find_element(By.LINK_TEXT, "Find").click()
    wait_for_path(driver, "/find")
    for label, text in [("Device id", device), ("Key", key), ("Value", value)]:
        field = labelled(driver, label)
        field.clear()
        if text:
            field.send_keys(text)
    button(driver, "List devices").click()
    WebDriverWait(driver, 20).until(lambda d: "go=list" in d.current_url and d.find_elements(By.ID, "found-heading"))
    return [a.text for a in driver.find_elements(By.CSS_SELECTOR, "td[data-label='Device'] a")]


def test_find_lists_devices_by_the_beginning_of_their_ids_and_by_a_tag(world: World, vic: WebDriver) -> None:
    assert list_devices(vic, "phone-") == [DEVICE, "phone-2"]
    assert_no_horizontal_scroll(vic)
    assert list_devices(vic, "", "campaign", "spring") == TAGGED
    tagged = vic.find_element(By.XPATH, "//tr[td[@data-label='Device']//a[normalize-space()='tablet-1']]")
    assert "promo" in tagged.find_element(By.CSS_SELECTOR, "td[data-label='Tagged notifications']").text
    assert list_devices(vic, "tab", "campaign", "spring") == ["tablet-1"]
    assert list_devices(vic, "phone-", "campaign", "autumn") == []
    assert "No device whose id starts with phone-" in vic.find_element(By.CSS_SELECTOR, "[role=status]").text
    # A device found opens with its notifications narrowed to the tag.
    list_devices(vic, "", "campaign", "spring")
    vic.find_element(By.LINK_TEXT, "tablet-1").click()
    wait_for_path(vic, "/device/tablet-1")
    row(vic, "notifications-heading", "promo")
    assert "Showing the notifications whose userInfo has campaign = spring" in vic.find_element(By.TAG_NAME, "main").text


def test_an_operator_edits_a_body_after_confirming_and_a_viewer_cannot(world: World, ana: WebDriver,
                                                                      vic: WebDriver) -> None:
    device = "phone-2"
    new_body = f"{HOSTILE} 20% off"
    try:
        ana.get(world.url + f"/device/{device}")
        row(ana, "notifications-heading", "promo").find_element(By.CSS_SELECTOR, "a[href$='/edit?id=promo']").click()
        wait_for_path(ana, f"/device/{device}/edit")
        wait_for_heading(ana, "Edit notification")
        assert_no_horizontal_scroll(ana)
        body = labelled(ana, "Body")
        assert body.get_attribute("value") == PROMO_BODY
        body.clear()
        body.send_keys(new_body)
        button(ana, "Review the change").click()
        wait_for_path(ana, f"/device/{device}/act")
        wait_for_heading(ana, "Edit notification")
        main = ana.find_element(By.TAG_NAME, "main").text
        assert f"Change notification promo of device {device}?" in main and new_body in main, main
        assert world.notification("promo", device)["alertBody"] == PROMO_BODY, "edited before confirming"  # type: ignore[index]

        button(ana, "Change notification promo").click()
        wait_for_heading(ana, "Edited 1 notification")
        assert world.notification("promo", device)["alertBody"] == new_body  # type: ignore[index]
        eventually(lambda: [e for e in world.audit_entries()
                            if e.get("who") == "ana" and e.get("action") == "edit" and e.get("device") == device
                            and e.get("ids") == ["promo"] and e.get("outcome") == "ok"],
                   5, "the audit line of ana's edit")
        ana.find_element(By.LINK_TEXT, f"Back to device {device}").click()
        wait_for_path(ana, f"/device/{device}")
        assert new_body in cell(row(ana, "notifications-heading", "promo"), "Notification").text
        assert not ana.find_elements(By.TAG_NAME, "script"), "the edited body became a script"

        # The viewer: no Edit link, and the server refuses the forged edit.
        vic.get(world.url + f"/device/{device}")
        row(vic, "notifications-heading", "promo")
        assert vic.find_elements(By.CSS_SELECTOR, "a[href*='/edit?']") == []
        session = session_of(vic)
        status, answer = post(world, f"/device/{device}/act",
                              [("action", "edit"), ("ids", "promo"), ("alertBody", "hacked"), ("csrf", session.csrf),
                               ("confirm", "yes")], session, world.url)
        assert status == 403, answer
        vic.get(world.url + f"/device/{device}/edit?id=promo")
        assert "viewer" in vic.find_element(By.CSS_SELECTOR, "[role=alert]").text
        assert vic.find_elements(By.CSS_SELECTOR, "textarea") == []
        assert world.notification("promo", device)["alertBody"] == new_body  # type: ignore[index]
    finally:
        world.run("update", "--device", device, "--id", "promo", "--body", PROMO_BODY)


def evil_site(target: str, fields: list[tuple[str, str]]) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A page on another origin (another port of 127.0.0.1: same site, so the browser sends the
    SameSite=Strict cookie, and only the console's Origin check stands) with a form aimed at `target`."""
    inputs = "".join(f'<input type="hidden" name="{n}" value="{v}">' for n, v in fields)
    page = (f'<!doctype html><title>Win</title><form method="post" action="{target}">{inputs}'
            f'<button type="submit">Claim your prize</button></form>').encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def test_a_cross_origin_form_and_a_post_without_the_token_are_refused(world: World, ana: WebDriver) -> None:
    ana.get(world.url + "/fleet")
    session = session_of(ana)
    act = f"/device/{DEVICE}/act"
    cancel = [("action", "cancel"), ("ids", "pill"), ("csrf", session.csrf), ("confirm", "yes")]
    before = world.notification("pill")
    assert before is not None

    # In the browser: another origin's page, even one that knows the token, posts in vain.
    server, evil = evil_site(world.url + act, cancel)
    try:
        ana.get(evil)
        button(ana, "Claim your prize").click()
        WebDriverWait(ana, 20).until(lambda d: d.current_url.startswith(world.url), "the console's answer")
        wait_for_heading(ana, "Not sent")
        assert "not sent from this console" in ana.find_element(By.CSS_SELECTOR, "[role=alert]").text
    finally:
        server.shutdown()
        server.server_close()

    # By program: another Origin; no Origin nor Referer; no token; a wrong token.
    assert post(world, act, cancel, session, "http://evil.example")[0] == 403
    assert post(world, act, cancel, session, None)[0] == 403
    without_token = [f for f in cancel if f[0] != "csrf"]
    assert post(world, act, without_token, session, world.url)[0] == 403
    assert post(world, act, without_token + [("csrf", "0" * len(session.csrf))], session, world.url)[0] == 403
    assert world.notification("pill") == before, "a refused post changed the reminder"

    # The same request with the console's origin and the token is taken (here only asked to confirm),
    # so the refusals above are the Origin's and the token's.
    status, body = post(world, act, [f for f in cancel if f[0] != "confirm"], session, world.url)
    assert status == 200 and 'name="confirm" value="yes"' in body, body
    assert world.notification("pill") == before


def photograph(driver: WebDriver, name: str) -> None:
    """The device page saved from its actions down: the reminder's rule, times and body, and (at 1280 px)
    the inbox and the history."""
    driver.execute_script("arguments[0].scrollIntoView()", driver.find_element(By.CSS_SELECTOR, "fieldset.actions"))
    assert driver.save_screenshot(str(IMAGES / name))


def test_pages_fit_360px_and_the_device_page_is_photographed(world: World, ana: WebDriver) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    size(ana, 360, 800)
    try:
        ana.get(world.url + "/fleet")
        button(ana, "Sign out").click()
        wait_for_path(ana, "/login")
        assert_no_horizontal_scroll(ana)
        sign_in(ana, world, "ana")  # the form, at 360 px
        assert_no_horizontal_scroll(ana)
        ana.find_element(By.LINK_TEXT, "Find").click()
        wait_for_path(ana, "/find")
        assert_no_horizontal_scroll(ana)
        labelled(ana, "Device id").send_keys(DEVICE, Keys.ENTER)
        wait_for_path(ana, f"/device/{DEVICE}")
        assert len(cell(row(ana, "notifications-heading", "pill"), "Next occurrences")
                   .find_elements(By.CSS_SELECTOR, "ol.times > li")) == NEXT_TIMES
        assert_no_horizontal_scroll(ana)
        photograph(ana, "console-device-360.png")

        ana.find_element(By.CSS_SELECTOR, "input[name=ids][value=pill]").click()
        button(ana, "Pause").click()
        wait_for_path(ana, f"/device/{DEVICE}/act")
        wait_for_heading(ana, "Pause notifications")
        assert_no_horizontal_scroll(ana)
        ana.find_element(By.LINK_TEXT, "Back without changing anything").click()
        wait_for_path(ana, f"/device/{DEVICE}")
        assert world.notification("pill")["enabled"] is True  # type: ignore[index]

        size(ana, 1280, 900)
        ana.refresh()
        assert heading(ana) == f"Device {DEVICE}"
        photograph(ana, "console-device-1280.png")
    finally:
        size(ana, 1280, 900)
    for name, width in [("console-device-360.png", 360), ("console-device-1280.png", 1280)]:
        png = (IMAGES / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == width, name
