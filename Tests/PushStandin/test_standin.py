"""The push stand-in's own tests: a real HTTP/2 client (httpx with h2) against `standin.py serve`,
credentials made by `standin.py keys`, JWTs signed with PyJWT and Web Push payloads encrypted with
http_ece, as an application server would.

    scripts/push-standin --selftest        or   .build/push-venv/bin/python -m pytest Tests/PushStandin
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import http_ece  # type: ignore[import-untyped]
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "standin.py"
DEVICE = "ab" * 32
FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for localhost and 127.0.0.1 it signed, made with the
    openssl command as Sources/ChimeHarness/TestCertificates.swift makes them."""
    (directory / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*arguments: str) -> None:
        subprocess.run(["openssl", *arguments], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=Chime test CA")
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.crt", "-days", "1", "-extfile", "server.ext")
    return directory / "ca.crt", directory / "server.crt", directory / "server.key"


@dataclass
class StandIn:
    base: str  # https://127.0.0.1:PORT
    control: str  # http://127.0.0.1:CONTROL-PORT
    keys: Path
    ca: Path

    def get(self, path: str) -> Any:
        return httpx.get(self.control + path, timeout=5).json()

    def post(self, path: str, body: Any) -> Any:
        response = httpx.post(self.control + path, json=body, timeout=5)
        assert response.status_code == 200, response.text
        return response.json()

    def received(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.get("/received")
        return entries

    def client(self, http2: bool = True, timeout: float = 5) -> httpx.Client:
        return httpx.Client(http2=http2, verify=self.tls(), timeout=timeout)

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    # What a deployment reads from the key files

    def apns_token(self, key_pem: str | None = None, iat: float | None = None, kid: str | None = None,
                   iss: str | None = None) -> str:
        ids = json.loads((self.keys / "apns.json").read_text())
        key = key_pem or (self.keys / "apns-key.p8").read_text()
        claims = {"iss": iss or ids["teamId"], "iat": int(iat if iat is not None else time.time())}
        return jwt.encode(claims, key, algorithm="ES256", headers={"kid": kid or ids["keyId"]})

    def service_account(self) -> dict[str, Any]:
        account: dict[str, Any] = json.loads((self.keys / "fcm-service-account.json").read_text())
        return account

    def assertion(self, **overrides: Any) -> str:
        account = self.service_account()
        now = int(time.time())
        claims = {"iss": account["client_email"], "scope": FCM_SCOPE, "aud": self.base + "/token",
                  "iat": now, "exp": now + 3600}
        claims.update(overrides)
        return jwt.encode(claims, account["private_key"], algorithm="RS256",
                          headers={"kid": account["private_key_id"]})

    def vapid(self, endpoint: str, key_pem: bytes | None = None, **overrides: Any) -> str:
        private = serialization.load_pem_private_key(key_pem or (self.keys / "vapid-private.pem").read_bytes(), None)
        assert isinstance(private, ec.EllipticCurvePrivateKey)
        public = private.public_key().public_bytes(serialization.Encoding.X962,
                                                   serialization.PublicFormat.UncompressedPoint)
        parts = urlsplit(endpoint)
        claims = {"aud": f"{parts.scheme}://{parts.netloc}", "exp": int(time.time()) + 12 * 3600,
                  "sub": "mailto:ops@example.com"}
        claims.update(overrides)
        token = jwt.encode(claims, private, algorithm="ES256", headers={"typ": "JWT"})
        return f"vapid t={token}, k={b64url(public)}"


@pytest.fixture(scope="session")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    directory = tmp_path_factory.mktemp("standin")
    ca, cert, key = make_certificates(directory)
    keys = directory / "keys"
    subprocess.run([sys.executable, str(STANDIN), "keys", "--dir", str(keys)], check=True)
    process = subprocess.Popen(
        [sys.executable, str(STANDIN), "serve", "--keys", str(keys), "--cert", str(cert), "--key", str(key),
         "--port", "0", "--control-port", "0", "--quiet"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().split()
        assert line[:1] == ["ready"], f"the stand-in said {line!r}"
        yield StandIn(f"https://127.0.0.1:{line[1]}", f"http://127.0.0.1:{line[2]}", keys, ca)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(autouse=True)
def reset(standin: StandIn) -> None:
    standin.post("/reset", {})


def apns_headers(token: str, **extra: str) -> dict[str, str]:
    headers = {"authorization": f"bearer {token}", "apns-topic": "com.example.chime",
               "apns-push-type": "alert", "apns-priority": "10", "apns-expiration": "0"}
    headers.update(extra)
    return headers


ALERT = {"aps": {"alert": {"title": "Stand-up", "body": "in five minutes"}}}


# --- credentials


def test_keys_are_what_a_deployment_holds(standin: StandIn) -> None:
    for name in ("apns-key.p8", "apns.json", "fcm-service-account.json", "vapid-private.pem", "vapid-public.txt"):
        assert stat.S_IMODE(os.stat(standin.keys / name).st_mode) == 0o600, name
    assert (standin.keys / "apns-key.p8").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    ids = json.loads((standin.keys / "apns.json").read_text())
    assert len(ids["keyId"]) == 10 and len(ids["teamId"]) == 10
    account = standin.service_account()
    assert account["type"] == "service_account"
    assert account["private_key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert account["client_email"].endswith(f"@{account['project_id']}.iam.gserviceaccount.com")
    for name in ("private_key_id", "client_id", "auth_uri", "token_uri", "auth_provider_x509_cert_url",
                 "client_x509_cert_url"):
        assert account[name]
    private = serialization.load_pem_private_key((standin.keys / "vapid-private.pem").read_bytes(), None)
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    public = private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    assert unb64url((standin.keys / "vapid-public.txt").read_text().strip()) == public


# --- APNs


def test_apns_accepts_a_correct_request(standin: StandIn) -> None:
    apns_id = str(uuid.uuid4())
    with standin.client() as client:
        response = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT,
                               headers=apns_headers(standin.apns_token(), **{"apns-id": apns_id,
                                                                            "apns-collapse-id": "standup"}))
    assert response.http_version == "HTTP/2"
    assert response.status_code == 200
    assert response.headers["apns-id"] == apns_id
    assert response.content == b""
    [entry] = standin.received()
    assert entry["service"] == "apns" and entry["key"] == DEVICE
    assert entry["status"] == 200 and entry["checks"] == []
    assert entry["body"] == ALERT
    assert entry["headers"]["apns-collapse-id"] == "standup"
    assert entry["headers"]["authorization"].startswith("bearer ")
    assert entry["jwt"]["header"]["kid"] == json.loads((standin.keys / "apns.json").read_text())["keyId"]


def test_apns_refuses_a_token_signed_by_another_key(standin: StandIn) -> None:
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with standin.client() as client:
        response = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT,
                               headers=apns_headers(standin.apns_token(key_pem=other)))
    assert response.status_code == 403
    assert response.json() == {"reason": "InvalidProviderToken"}
    assert "apns-id" in response.headers
    [entry] = standin.received()
    assert entry["status"] == 403
    assert entry["checks"] == ["apns.jwt.signature"]


def test_apns_refuses_an_old_token_wrong_team_and_missing_topic(standin: StandIn) -> None:
    with standin.client() as client:
        old = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT,
                          headers=apns_headers(standin.apns_token(iat=time.time() - 3700)))
        team = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT,
                           headers=apns_headers(standin.apns_token(iss="ABCDE12345")))
        headers = apns_headers(standin.apns_token())
        del headers["apns-topic"]
        topic = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=headers)
        token = client.post(f"{standin.base}/3/device/not-hex", json=ALERT, headers=apns_headers(standin.apns_token()))
    assert (old.status_code, old.json()) == (403, {"reason": "ExpiredProviderToken"})
    assert (team.status_code, team.json()) == (403, {"reason": "InvalidProviderToken"})
    assert (topic.status_code, topic.json()) == (400, {"reason": "MissingTopic"})
    assert (token.status_code, token.json()) == (400, {"reason": "BadDeviceToken"})
    assert [entry["checks"] for entry in standin.received()] == [
        ["apns.jwt.iat.expired"], ["apns.jwt.iss"], ["apns.topic.present"], ["apns.device-token"]]


def test_apns_scripted_unregistered_then_success(standin: StandIn) -> None:
    standin.post("/script", {"service": "apns", "key": DEVICE, "responses": [{"status": 410}]})
    with standin.client() as client:
        gone = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(standin.apns_token()))
        again = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(standin.apns_token()))
    assert gone.status_code == 410
    body = gone.json()
    assert body["reason"] == "Unregistered"
    assert abs(body["timestamp"] - time.time() * 1000) < 60_000
    assert again.status_code == 200
    assert [(entry["status"], entry["checks"]) for entry in standin.received()] == [(410, []), (200, [])]


def test_many_concurrent_streams_on_one_connection(standin: StandIn) -> None:
    token = standin.apns_token()

    async def send_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(http2=True, verify=standin.tls(), timeout=10,
                                     limits=httpx.Limits(max_connections=1)) as client:
            return await asyncio.gather(*[
                client.post(f"{standin.base}/3/device/{DEVICE}", json={"aps": {"badge": n}},
                            headers=apns_headers(token)) for n in range(40)])

    responses = asyncio.run(send_all())
    assert [response.status_code for response in responses] == [200] * 40
    entries = standin.received()
    assert len(entries) == 40
    assert len({entry["connection"] for entry in entries}) == 1
    assert len({entry["stream"] for entry in entries}) == 40
    assert sorted(entry["body"]["aps"]["badge"] for entry in entries) == list(range(40))
    assert all(entry["checks"] == [] for entry in entries)


# --- FCM


def fcm_access_token(standin: StandIn, client: httpx.Client) -> str:
    response = client.post(f"{standin.base}/token", data={
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": standin.assertion()})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["token_type"] == "Bearer" and 0 < body["expires_in"] <= 3600
    token: str = body["access_token"]
    return token


def fcm_message(token: str = "fcm-device-1") -> dict[str, Any]:
    return {"message": {"token": token, "notification": {"title": "Stand-up", "body": "in five minutes"},
                        "data": {"chimeId": "n-1"}, "android": {"ttl": "3600s", "priority": "high"}}}


def test_fcm_token_grant_then_send(standin: StandIn) -> None:
    project = standin.service_account()["project_id"]
    with standin.client() as client:
        access_token = fcm_access_token(standin, client)
        response = client.post(f"{standin.base}/v1/projects/{project}/messages:send", json=fcm_message(),
                               headers={"authorization": f"Bearer {access_token}"})
    assert response.status_code == 200, response.text
    assert response.json()["name"].startswith(f"projects/{project}/messages/")
    grant, send = standin.received()
    assert (grant["service"], grant["status"], grant["checks"]) == ("fcm-token", 200, [])
    assert grant["jwt"]["claims"]["scope"] == FCM_SCOPE
    assert (send["service"], send["status"], send["checks"], send["key"]) == ("fcm", 200, [], "fcm-device-1")
    assert send["body"] == fcm_message()


def test_fcm_refuses_unknown_access_token_bad_assertion_and_bad_data(standin: StandIn) -> None:
    project = standin.service_account()["project_id"]
    url = f"{standin.base}/v1/projects/{project}/messages:send"
    with standin.client() as client:
        unknown = client.post(url, json=fcm_message(), headers={"authorization": "Bearer ya29.forged"})
        grant = client.post(f"{standin.base}/token", data={
            "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
            "assertion": standin.assertion(exp=int(time.time()) + 7200)})
        access_token = fcm_access_token(standin, client)
        message = fcm_message()
        message["message"]["data"]["count"] = 3
        data = client.post(url, json=message, headers={"authorization": f"Bearer {access_token}"})
    assert unknown.status_code == 401
    assert unknown.json()["error"]["status"] == "UNAUTHENTICATED"
    assert (grant.status_code, grant.json()["error"]) == (400, "invalid_grant")
    assert data.status_code == 400
    assert data.json()["error"]["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert [entry["checks"] for entry in standin.received()] == [
        ["fcm.authorization"], ["fcm-token.jwt.lifetime"], [], ["fcm.string-map"]]


def test_fcm_expired_access_token_is_unauthenticated(standin: StandIn) -> None:
    project = standin.service_account()["project_id"]
    with standin.client() as client:
        access_token = fcm_access_token(standin, client)
        standin.post("/expire-tokens", {})
        response = client.post(f"{standin.base}/v1/projects/{project}/messages:send", json=fcm_message(),
                               headers={"authorization": f"Bearer {access_token}"})
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_fcm_scripted_429_with_retry_after_then_success(standin: StandIn) -> None:
    project = standin.service_account()["project_id"]
    standin.post("/script", {"service": "fcm", "key": "fcm-device-1",
                             "responses": [{"status": 429, "headers": {"retry-after": "2"}}]})
    with standin.client() as client:
        access_token = fcm_access_token(standin, client)
        url = f"{standin.base}/v1/projects/{project}/messages:send"
        throttled = client.post(url, json=fcm_message(), headers={"authorization": f"Bearer {access_token}"})
        after = client.post(url, json=fcm_message(), headers={"authorization": f"Bearer {access_token}"})
    assert throttled.status_code == 429
    assert throttled.headers["retry-after"] == "2"
    error = throttled.json()["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["details"] == [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError",
                                 "errorCode": "QUOTA_EXCEEDED"}]
    assert after.status_code == 200
    assert [entry["status"] for entry in standin.received()] == [200, 429, 200]


def test_fcm_scripted_unregistered(standin: StandIn) -> None:
    project = standin.service_account()["project_id"]
    standin.post("/script", {"service": "fcm", "key": "fcm-device-1", "responses": [{"status": 404}]})
    with standin.client() as client:
        access_token = fcm_access_token(standin, client)
        response = client.post(f"{standin.base}/v1/projects/{project}/messages:send", json=fcm_message(),
                               headers={"authorization": f"Bearer {access_token}"})
    assert response.status_code == 404
    assert response.json()["error"]["details"][0]["errorCode"] == "UNREGISTERED"


def test_http1_fallback_for_the_token_endpoint(standin: StandIn) -> None:
    with standin.client(http2=False) as client:
        fcm_access_token(standin, client)
    [entry] = standin.received()
    assert (entry["http"], entry["checks"]) == ("1.1", [])


# --- Web Push


def encrypt(subscription: dict[str, Any], plaintext: bytes) -> bytes:
    """RFC 8291 as an application server does it, with http_ece."""
    sender = ec.generate_private_key(ec.SECP256R1())  # keyid: http_ece puts its public key there
    body: bytes = http_ece.encrypt(plaintext, private_key=sender, dh=unb64url(subscription["keys"]["p256dh"]),
                                   auth_secret=unb64url(subscription["keys"]["auth"]), version="aes128gcm")
    return body


def test_subscription_is_a_push_subscription_json(standin: StandIn) -> None:
    subscription = standin.post("/subscriptions", {})
    assert set(subscription) == {"endpoint", "expirationTime", "keys"}
    assert subscription["expirationTime"] is None
    assert subscription["endpoint"].startswith(standin.base + "/wp/")
    assert len(unb64url(subscription["keys"]["p256dh"])) == 65
    assert len(unb64url(subscription["keys"]["auth"])) == 16


def test_webpush_accepts_an_encrypted_vapid_push(standin: StandIn) -> None:
    subscription = standin.post("/subscriptions", {})
    payload = {"title": "Stand-up", "body": "in five minutes"}
    with standin.client() as client:
        response = client.post(subscription["endpoint"], content=encrypt(subscription, json.dumps(payload).encode()),
                               headers={"ttl": "3600", "urgency": "high", "topic": "standup",
                                        "content-encoding": "aes128gcm",
                                        "authorization": standin.vapid(subscription["endpoint"])})
    assert response.status_code == 201, response.text
    assert response.headers["location"].startswith(standin.base + "/m/")
    [entry] = standin.received()
    assert (entry["service"], entry["status"], entry["checks"]) == ("webpush", 201, [])
    assert entry["body"] == payload
    assert entry["key"] == subscription["endpoint"].rsplit("/", 1)[1]


def test_webpush_refuses_another_vapid_key_missing_ttl_and_undecryptable(standin: StandIn) -> None:
    subscription = standin.post("/subscriptions", {})
    other = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    body = encrypt(subscription, b"hello")
    vapid = standin.vapid(subscription["endpoint"])
    with standin.client() as client:
        key = client.post(subscription["endpoint"], content=body, headers={
            "ttl": "60", "content-encoding": "aes128gcm",
            "authorization": standin.vapid(subscription["endpoint"], key_pem=other)})
        ttl = client.post(subscription["endpoint"], content=body,
                          headers={"content-encoding": "aes128gcm", "authorization": vapid})
        other_subscription = standin.post("/subscriptions", {})
        wrong = client.post(subscription["endpoint"], content=encrypt(other_subscription, b"hello"),
                            headers={"ttl": "60", "content-encoding": "aes128gcm", "authorization": vapid})
        audience = client.post(subscription["endpoint"], content=body, headers={
            "ttl": "60", "content-encoding": "aes128gcm",
            "authorization": standin.vapid(subscription["endpoint"], aud="https://push.example.net")})
    assert key.status_code == 403
    assert (ttl.status_code, ttl.json()["errno"]) == (400, 111)
    assert wrong.status_code == 400 and "webpush.ece.decrypt" in wrong.json()["message"]
    assert audience.status_code == 401
    assert [entry["checks"] for entry in standin.received()] == [
        ["webpush.vapid.k"], ["webpush.ttl"], ["webpush.ece.decrypt"], ["webpush.vapid.aud"]]


def test_webpush_too_large_and_gone(standin: StandIn) -> None:
    subscription = standin.post("/subscriptions", {})
    headers = {"ttl": "60", "content-encoding": "aes128gcm", "authorization": standin.vapid(subscription["endpoint"])}
    with standin.client() as client:
        # Larger than the 65,535-byte initial window: the stand-in must give the window back.
        large = client.post(subscription["endpoint"], content=encrypt(subscription, b"x" * 100_000), headers=headers)
        standin.post("/script", {"service": "webpush", "key": subscription["endpoint"].rsplit("/", 1)[1],
                                 "responses": [{"status": 410}]})
        scripted = client.post(subscription["endpoint"], content=encrypt(subscription, b"hi"), headers=headers)
        httpx.delete(f"{standin.control}/subscriptions/{subscription['endpoint'].rsplit('/', 1)[1]}")
        gone = client.post(subscription["endpoint"], content=encrypt(subscription, b"hi"), headers=headers)
        unknown = client.post(standin.base + "/wp/no-such-subscription", content=b"", headers={"ttl": "0"})
    assert large.status_code == 413
    assert scripted.status_code == 410
    assert gone.status_code == 410
    assert unknown.status_code == 404
    assert [(entry["status"], entry["checks"]) for entry in standin.received()] == [
        (413, ["webpush.size"]), (410, []), (410, []), (404, [])]


# --- blackholes


def test_blackhole_leaves_the_stream_unanswered(standin: StandIn) -> None:
    standin.post("/blackhole", {"service": "apns", "on": True})
    project = standin.service_account()["project_id"]
    with standin.client(timeout=1.5) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(standin.apns_token()))
        # The connection and the other services still answer.
        access_token = fcm_access_token(standin, client)
        sent = client.post(f"{standin.base}/v1/projects/{project}/messages:send", json=fcm_message(),
                           headers={"authorization": f"Bearer {access_token}"})
        assert sent.status_code == 200
        standin.post("/blackhole", {"service": "apns", "on": False})
        answered = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(standin.apns_token()))
        assert answered.status_code == 200
    first = standin.received()[0]
    assert (first["service"], first["status"], first["checks"]) == ("apns", None, [])


def test_scripted_blackhole_then_success(standin: StandIn) -> None:
    standin.post("/script", {"service": "apns", "key": DEVICE, "responses": [{"blackhole": True}]})
    with standin.client(timeout=1.5) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(standin.apns_token()))
        answered = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(standin.apns_token()))
    assert answered.status_code == 200
    assert [entry["status"] for entry in standin.received()] == [None, 200]


def test_scripted_delay_and_several_connections(standin: StandIn) -> None:
    standin.post("/script", {"service": "apns", "key": "*", "responses": [{"status": 200, "delay": 0.6}]})
    token = standin.apns_token()
    clients = [standin.client() for _ in range(3)]
    try:
        started = time.monotonic()
        slow = clients[0].post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(token))
        assert slow.status_code == 200 and time.monotonic() - started >= 0.6
        for client in clients[1:]:
            assert client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT,
                               headers=apns_headers(token)).status_code == 200
    finally:
        for client in clients:
            client.close()
    assert len({entry["connection"] for entry in standin.received()}) == 3


def test_apns_refuses_http1(standin: StandIn) -> None:
    with standin.client(http2=False) as client:
        response = client.post(f"{standin.base}/3/device/{DEVICE}", json=ALERT, headers=apns_headers(standin.apns_token()))
    assert response.status_code == 505
    assert standin.received()[0]["checks"] == ["apns.http2"]
