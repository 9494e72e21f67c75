#!/usr/bin/env python3
"""A loopback stand-in for the push services Chime delivers to: APNs, FCM HTTP v1 with Google's
OAuth 2.0 token endpoint, and a Web Push (RFC 8030) push service.

One process serves all of them over TLS on one port, HTTP/2 by ALPN (`h2`, with `http/1.1` as a
fallback for the services that have one), and answers with the real services' status codes,
headers and bodies. It checks every request with libraries independent of Chime: PyJWT and
cryptography for the APNs provider token, the OAuth assertion and VAPID, http_ece for the Web
Push payload. A request that fails a check is answered as the real service would answer it (or
400 where the real service has no such check) and the failed check is recorded, so a test can
assert that no check failed.

A second port, plain HTTP, is the control and inspection API (README.md beside this file).

    standin.py keys --dir DIR [--project ID] [--token-uri URL]
    standin.py serve --keys DIR --cert CERT --key KEY [--port 0] [--control-port 0] ...
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import collections
import json
import os
import re
import secrets
import signal
import ssl
import string
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlsplit

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import http_ece  # type: ignore[import-untyped]
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

SERVICES = ("apns", "fcm", "fcm-token", "webpush")
FCM_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
APNS_PUSH_TYPES = {
    "alert", "background", "location", "voip", "complication", "fileprovider", "mdm",
    "liveactivity", "pushtotalk", "widgets", "controls",
}
WEBPUSH_URGENCIES = {"very-low", "low", "normal", "high"}
WEBPUSH_MAX_BODY = 4096
HTTP_REASONS = {
    200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
    404: "Not Found", 405: "Method Not Allowed", 410: "Gone", 413: "Payload Too Large",
    429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
    503: "Service Unavailable", 505: "HTTP Version Not Supported",
}
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
MAX_REQUEST_BODY = 1 << 20


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Strict base64url, padding optional: raises ValueError on anything else."""
    if not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError("not base64url")
    text = text.rstrip("=")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as error:
        raise ValueError(str(error)) from error


def uncompressed_point(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


# ---------------------------------------------------------------------------------------------
# Credentials


def write_private(path: Path, data: bytes) -> None:
    """Writes a file only its owner can read, whatever the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.chmod(path, 0o600)


def random_id(length: int) -> str:
    return "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(length))


def make_keys(directory: Path, project: str, token_uri: str) -> None:
    """Writes what a deployment holds: an APNs .p8 with its key and team ids, an FCM service
    account file as Google issues it, and a VAPID key pair."""
    directory.mkdir(parents=True, exist_ok=True)
    pkcs8 = serialization.PrivateFormat.PKCS8
    pem = serialization.Encoding.PEM
    plain = serialization.NoEncryption()

    apns_key = ec.generate_private_key(ec.SECP256R1())
    write_private(directory / "apns-key.p8", apns_key.private_bytes(pem, pkcs8, plain))
    apns = {"keyId": random_id(10), "teamId": random_id(10)}
    write_private(directory / "apns.json", (json.dumps(apns, indent=2) + "\n").encode())

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    account = f"firebase-adminsdk-{secrets.token_hex(3)[:5]}"
    email = f"{account}@{project}.iam.gserviceaccount.com"
    service_account = {
        "type": "service_account",
        "project_id": project,
        "private_key_id": secrets.token_hex(20),
        "private_key": rsa_key.private_bytes(pem, pkcs8, plain).decode("ascii"),
        "client_email": email,
        "client_id": str(secrets.randbelow(9 * 10**20) + 10**20),
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": token_uri,
        "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
        "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/"
        + email.replace("@", "%40"),
        "universe_domain": "googleapis.com",
    }
    write_private(directory / "fcm-service-account.json", (json.dumps(service_account, indent=2) + "\n").encode())

    vapid_key = ec.generate_private_key(ec.SECP256R1())
    sec1 = serialization.PrivateFormat.TraditionalOpenSSL
    write_private(directory / "vapid-private.pem", vapid_key.private_bytes(pem, sec1, plain))
    write_private(directory / "vapid-public.txt", b64url_encode(uncompressed_point(vapid_key.public_key())).encode())


@dataclass
class Keys:
    """The public halves the stand-in verifies against, read from a `keys` directory."""

    apns_public: ec.EllipticCurvePublicKey
    apns_key_id: str
    apns_team_id: str
    fcm_public: rsa.RSAPublicKey
    fcm_private_key_id: str
    fcm_client_email: str
    fcm_project: str
    vapid_public: bytes  # uncompressed point, 65 bytes

    @staticmethod
    def load(directory: Path) -> Keys:
        apns_private = serialization.load_pem_private_key((directory / "apns-key.p8").read_bytes(), None)
        assert isinstance(apns_private, ec.EllipticCurvePrivateKey), "apns-key.p8 is not an EC key"
        apns = json.loads((directory / "apns.json").read_text())
        account = json.loads((directory / "fcm-service-account.json").read_text())
        fcm_private = serialization.load_pem_private_key(account["private_key"].encode(), None)
        assert isinstance(fcm_private, rsa.RSAPrivateKey), "the service account's key is not RSA"
        vapid_private = serialization.load_pem_private_key((directory / "vapid-private.pem").read_bytes(), None)
        assert isinstance(vapid_private, ec.EllipticCurvePrivateKey), "vapid-private.pem is not an EC key"
        vapid_public = uncompressed_point(vapid_private.public_key())
        written = b64url_decode((directory / "vapid-public.txt").read_text().strip())
        assert written == vapid_public, "vapid-public.txt is not the public key of vapid-private.pem"
        return Keys(
            apns_public=apns_private.public_key(),
            apns_key_id=apns["keyId"],
            apns_team_id=apns["teamId"],
            fcm_public=fcm_private.public_key(),
            fcm_private_key_id=account["private_key_id"],
            fcm_client_email=account["client_email"],
            fcm_project=account["project_id"],
            vapid_public=vapid_public,
        )


# ---------------------------------------------------------------------------------------------
# Requests, responses and what the stand-in keeps


@dataclass
class Request:
    method: str
    path: str
    authority: str
    headers: list[tuple[str, str]]  # names lowercased, in order, duplicates kept
    body: bytes
    http: str  # "2" or "1.1"
    connection: "ConnectionState"
    stream: int

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def header_map(self) -> dict[str, str]:
        """All headers, pseudo-headers included, a repeated one joined with ", "."""
        result: dict[str, str] = {}
        for key, value in self.headers:
            result[key] = f"{result[key]}, {value}" if key in result else value
        return result


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    delay: float = 0.0


def json_response(status: int, body: Any, headers: list[tuple[str, str]] | None = None,
                  content_type: str = "application/json; charset=UTF-8") -> Response:
    encoded = json.dumps(body, separators=(",", ":")).encode()
    return Response(status, [("content-type", content_type)] + (headers or []), encoded)


@dataclass
class ConnectionState:
    number: int
    apns_key_id: str | None = None  # the kid of the first provider token on this connection


@dataclass
class Subscription:
    id: str
    endpoint: str
    private_key: ec.EllipticCurvePrivateKey
    auth: bytes
    gone: bool = False

    def to_json(self) -> dict[str, Any]:
        """What a browser's PushSubscription.toJSON() gives."""
        return {
            "endpoint": self.endpoint,
            "expirationTime": None,
            "keys": {
                "p256dh": b64url_encode(uncompressed_point(self.private_key.public_key())),
                "auth": b64url_encode(self.auth),
            },
        }


class State:
    """What the control API shows and changes; shared by the TLS loop and the control threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: list[dict[str, Any]] = []
        self.scripts: dict[tuple[str, str], collections.deque[dict[str, Any]]] = {}
        self.blackholes: set[str] = set()
        self.subscriptions: dict[str, Subscription] = {}
        self.access_tokens: dict[str, float] = {}  # FCM access token -> when it expires

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            entry["seq"] = len(self.received) + 1
            self.received.append(entry)

    def next_scripted(self, service: str, key: str | None) -> dict[str, Any] | None:
        with self.lock:
            for candidate in ([key] if key is not None else []) + ["*"]:
                queue = self.scripts.get((service, candidate))
                if queue:
                    return queue.popleft()
        return None


# ---------------------------------------------------------------------------------------------
# The checks, one class for each service


class Checks:
    """The names of the checks a request failed, and the answer to the first failure."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.answer: Response | None = None

    def fail(self, name: str, answer: Response) -> None:
        self.failed.append(name)
        if self.answer is None:
            self.answer = answer


@dataclass
class Outcome:
    """What a service made of a request."""

    service: str | None
    key: str | None
    body: Any
    checks: Checks
    success: Callable[[], Response] | None  # the default answer when every check passed
    error_body: Callable[[int], Response] | None = None  # a scripted status without a body
    not_found: Response | None = None  # answered without a failed check (web push 404/410)
    jwt: dict[str, Any] | None = None


def decode_json_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body.decode("utf-8", "replace")


def unverified_jwt(token: str) -> dict[str, Any] | None:
    """The header and claims as sent, for the record; None when the token cannot be parsed."""
    try:
        return {
            "header": jwt.get_unverified_header(token),
            "claims": jwt.decode(token, options={"verify_signature": False}),
        }
    except jwt.PyJWTError:
        return None


def verify_jwt(token: str, key: Any, algorithm: str) -> dict[str, Any]:
    """PyJWT's signature check only; the time and identity claims are checked one by one by the
    caller so that each has its own name. Raises jwt.PyJWTError."""
    return jwt.decode(
        token, key=key, algorithms=[algorithm],
        options={"verify_signature": True, "verify_exp": False, "verify_nbf": False,
                 "verify_iat": False, "verify_aud": False, "verify_iss": False},
    )


def number(value: Any) -> float | None:
    """A JWT NumericDate as a float; None when the claim is missing or not a number."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class APNs:
    """Apple's provider API: POST /3/device/<token> with a provider authentication token."""

    def __init__(self, keys: Keys, sandbox: bool) -> None:
        self.keys = keys
        self.sandbox = sandbox

    @staticmethod
    def error(status: int, reason: str, apns_id: str) -> Response:
        body: dict[str, Any] = {"reason": reason}
        if status == 410:
            body["timestamp"] = int(time.time() * 1000)
        return Response(status, [("apns-id", apns_id)], json.dumps(body, separators=(",", ":")).encode())

    def default_error(self, status: int, apns_id: str) -> Response:
        reasons = {400: "BadDeviceToken", 403: "ExpiredProviderToken", 404: "BadPath",
                   405: "MethodNotAllowed", 410: "Unregistered", 413: "PayloadTooLarge",
                   429: "TooManyRequests", 500: "InternalServerError", 503: "ServiceUnavailable"}
        return self.error(status, reasons.get(status, "InternalServerError"), apns_id)

    def handle(self, request: Request) -> Outcome:
        checks = Checks()
        apns_id = request.header("apns-id") or str(uuid.uuid4())
        apns_id_valid = True
        try:
            uuid.UUID(apns_id)
            apns_id_valid = bool(re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", apns_id))
        except ValueError:
            apns_id_valid = False
        answer_id = apns_id if apns_id_valid else str(uuid.uuid4())

        def fail(name: str, status: int, reason: str) -> None:
            checks.fail(name, self.error(status, reason, answer_id))

        path = urlsplit(request.path).path
        token = path[len("/3/device/"):]
        if request.http != "2":
            fail("apns.http2", 505, "apns.http2")  # APNs speaks HTTP/2 only
        if request.method != "POST":
            fail("apns.method", 405, "MethodNotAllowed")
        if not token or "/" in token:
            fail("apns.path", 404, "BadPath")
        elif not re.fullmatch(r"(?:[0-9a-fA-F]{2}){32,100}", token):
            fail("apns.device-token", 400, "BadDeviceToken")
        names = [name for name, _ in request.headers if not name.startswith(":")]
        if len(names) != len(set(names)):
            fail("apns.duplicate-headers", 400, "DuplicateHeaders")

        recorded_jwt = None
        authorization = request.header("authorization")
        if authorization is None:
            fail("apns.authorization.present", 403, "MissingProviderToken")
        else:
            scheme, _, provider_token = authorization.partition(" ")
            provider_token = provider_token.strip()
            if scheme.lower() != "bearer" or not provider_token:
                fail("apns.authorization.scheme", 403, "InvalidProviderToken")
            else:
                recorded_jwt = unverified_jwt(provider_token)
                self.check_provider_token(provider_token, request.connection, checks, fail)

        topic = request.header("apns-topic")
        if not topic:
            fail("apns.topic.present", 400, "MissingTopic")
        push_type = request.header("apns-push-type")
        if push_type not in APNS_PUSH_TYPES:
            fail("apns.push-type", 400, "InvalidPushType")
        priority = request.header("apns-priority")
        if priority is not None and priority not in ("1", "5", "10"):
            fail("apns.priority", 400, "BadPriority")
        if push_type == "background" and priority not in (None, "5"):
            fail("apns.priority.background", 400, "BadPriority")
        if not apns_id_valid:
            fail("apns.id", 400, "BadMessageId")
        expiration = request.header("apns-expiration")
        if expiration is not None and not re.fullmatch(r"[0-9]{1,10}", expiration):
            fail("apns.expiration", 400, "BadExpirationDate")
        collapse_id = request.header("apns-collapse-id")
        if collapse_id is not None and len(collapse_id.encode()) > 64:
            fail("apns.collapse-id", 400, "BadCollapseId")

        limit = 5120 if push_type == "voip" else 4096
        payload: Any = None
        if not request.body:
            fail("apns.payload.empty", 400, "PayloadEmpty")
        elif len(request.body) > limit:
            fail("apns.payload.size", 413, "PayloadTooLarge")
        else:
            payload = decode_json_body(request.body)
            if not isinstance(payload, dict):
                fail("apns.payload.json", 400, "apns.payload.json")
            elif not isinstance(payload.get("aps"), dict):
                fail("apns.payload.aps", 400, "apns.payload.aps")
        if payload is None and request.body:
            payload = decode_json_body(request.body)

        def success() -> Response:
            headers = [("apns-id", answer_id)]
            if self.sandbox:
                headers.append(("apns-unique-id", str(uuid.uuid4())))
            return Response(200, headers)

        return Outcome("apns", token or None, payload, checks, success,
                       lambda status: self.default_error(status, answer_id), jwt=recorded_jwt)

    def check_provider_token(self, token: str, connection: ConnectionState, checks: Checks,
                             fail: Callable[[str, int, str], None]) -> None:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            fail("apns.jwt.format", 403, "InvalidProviderToken")
            return
        if header.get("alg") != "ES256":
            fail("apns.jwt.alg", 403, "InvalidProviderToken")
        kid = header.get("kid")
        if kid != self.keys.apns_key_id:
            fail("apns.jwt.kid", 403, "InvalidProviderToken")
        elif connection.apns_key_id is None:
            connection.apns_key_id = kid
        elif connection.apns_key_id != kid:
            fail("apns.jwt.kid.connection", 403, "UnrelatedKeyIdInToken")
        try:
            claims = verify_jwt(token, self.keys.apns_public, "ES256")
        except jwt.PyJWTError:
            fail("apns.jwt.signature", 403, "InvalidProviderToken")
            return
        if claims.get("iss") != self.keys.apns_team_id:
            fail("apns.jwt.iss", 403, "InvalidProviderToken")
        iat = number(claims.get("iat"))
        now = time.time()
        if iat is None:
            fail("apns.jwt.iat", 403, "InvalidProviderToken")
        elif now - iat > 3600:
            fail("apns.jwt.iat.expired", 403, "ExpiredProviderToken")
        elif iat - now > 60:
            fail("apns.jwt.iat.future", 403, "InvalidProviderToken")


def google_error(status: int, grpc_status: str, message: str, details: list[dict[str, Any]] | None = None,
                 headers: list[tuple[str, str]] | None = None) -> Response:
    """A google.rpc.Status in the JSON that Google's APIs answer with."""
    error: dict[str, Any] = {"code": status, "message": message, "status": grpc_status}
    if details is not None:
        error["details"] = details
    return json_response(status, {"error": error}, headers)


def fcm_error(status: int, grpc_status: str, message: str, error_code: str | None) -> Response:
    details = None
    if error_code is not None:
        details = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": error_code}]
    return google_error(status, grpc_status, message, details)


def bad_request(field_name: str, description: str) -> Response:
    return google_error(400, "INVALID_ARGUMENT", description, [
        {"@type": "type.googleapis.com/google.rpc.BadRequest",
         "fieldViolations": [{"field": field_name, "description": description}]},
    ])


def accepted(*names: str) -> set[str]:
    """A proto message's field names as its JSON accepts them: snake_case and lowerCamelCase."""
    result = set()
    for name in names:
        result.add(name)
        head, *rest = name.split("_")
        result.add(head + "".join(part.capitalize() for part in rest))
    return result


FCM_FIELDS = {
    "request": accepted("message", "validate_only"),
    "message": accepted("name", "data", "notification", "android", "webpush", "apns", "fcm_options",
                        "token", "topic", "condition"),
    "message.notification": accepted("title", "body", "image"),
    "message.android": accepted("collapse_key", "priority", "ttl", "restricted_package_name", "data",
                                "notification", "fcm_options", "direct_boot_ok", "bandwidth_constrained_ok",
                                "restricted_satellite_ok"),
    "message.apns": accepted("headers", "payload", "fcm_options", "live_activity_token"),
    "message.webpush": accepted("headers", "data", "notification", "fcm_options"),
}


class FCM:
    """FCM HTTP v1 (POST /v1/projects/{project}/messages:send) and the OAuth 2.0 token endpoint
    whose access tokens it accepts (POST /token)."""

    def __init__(self, keys: Keys, state: State, project: str, token_lifetime: int) -> None:
        self.keys = keys
        self.state = state
        self.project = project
        self.token_lifetime = token_lifetime

    # --- the token endpoint

    @staticmethod
    def oauth_error(error: str, description: str, status: int = 400) -> Response:
        return json_response(status, {"error": error, "error_description": description})

    def token_default_error(self, status: int) -> Response:
        if status == 400:
            return self.oauth_error("invalid_grant", "Invalid JWT Signature.")
        if status == 401:
            return self.oauth_error("invalid_client", "The OAuth client was not found.", 401)
        return self.oauth_error("internal_failure", "Backend Error", status)

    def handle_token(self, request: Request) -> Outcome:
        checks = Checks()
        form: dict[str, str] = {}
        recorded_jwt = None

        def fail(name: str, error: str, description: str, status: int = 400) -> None:
            checks.fail(name, self.oauth_error(error, description, status))

        if request.method != "POST":
            fail("fcm-token.method", "invalid_request", "Only POST is supported", 405)
        content_type = (request.header("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            fail("fcm-token.content-type", "invalid_request",
                 "Content-Type must be application/x-www-form-urlencoded")
        try:
            parsed = parse_qs(request.body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(request.body))
            form = {name: values[-1] for name, values in parsed.items()}
            if any(len(values) > 1 for values in parsed.values()):
                fail("fcm-token.form", "invalid_request", "A parameter was repeated")
        except (ValueError, UnicodeDecodeError):
            fail("fcm-token.form", "invalid_request", "The body is not a form")
        grant_type = form.get("grant_type")
        if grant_type != JWT_BEARER:
            fail("fcm-token.grant-type", "unsupported_grant_type", f"Invalid grant_type: {grant_type or ''}")
        assertion = form.get("assertion")
        if not assertion:
            fail("fcm-token.assertion.present", "invalid_request", "Missing required parameter: assertion")
        else:
            recorded_jwt = unverified_jwt(assertion)
            self.check_assertion(assertion, fail)

        def success() -> Response:
            access_token = "ya29.c." + secrets.token_urlsafe(96)
            with self.state.lock:
                self.state.access_tokens[access_token] = time.time() + self.token_lifetime
            return json_response(200, {"access_token": access_token, "expires_in": self.token_lifetime,
                                       "token_type": "Bearer"})

        key = (recorded_jwt or {}).get("claims", {}).get("iss")
        return Outcome("fcm-token", key if isinstance(key, str) else None, form, checks, success,
                       self.token_default_error, jwt=recorded_jwt)

    def check_assertion(self, assertion: str, fail: Callable[..., None]) -> None:
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError:
            fail("fcm-token.jwt.format", "invalid_grant", "Invalid JWT: could not be parsed.")
            return
        if header.get("alg") != "RS256":
            fail("fcm-token.jwt.alg", "invalid_grant", "Invalid JWT Signature.")
        if "kid" in header and header["kid"] != self.keys.fcm_private_key_id:
            fail("fcm-token.jwt.kid", "invalid_grant", "Invalid JWT Signature.")
        try:
            claims = verify_jwt(assertion, self.keys.fcm_public, "RS256")
        except jwt.PyJWTError:
            fail("fcm-token.jwt.signature", "invalid_grant", "Invalid JWT Signature.")
            return
        if claims.get("iss") != self.keys.fcm_client_email:
            fail("fcm-token.jwt.iss", "invalid_grant", "Invalid grant: account not found")
        scopes = claims.get("scope")
        if not isinstance(scopes, str) or FCM_SCOPE not in scopes.split(" "):
            fail("fcm-token.jwt.scope", "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        audience = claims.get("aud")
        parts = urlsplit(audience) if isinstance(audience, str) else None
        if parts is None or parts.scheme != "https" or not parts.netloc or parts.path != "/token" or parts.query:
            fail("fcm-token.jwt.aud", "invalid_grant",
                 f"Invalid JWT: Failed audience check. The right audience is {self.token_audience_hint()}")
        iat, exp, now = number(claims.get("iat")), number(claims.get("exp")), time.time()
        times = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. " \
                "Check your iat and exp values in the JWT claim."
        if iat is None or exp is None:
            fail("fcm-token.jwt.iat-exp", "invalid_grant", times)
        else:
            if exp <= iat or exp - iat > 3600:
                fail("fcm-token.jwt.lifetime", "invalid_grant", times)
            if iat - now > 60:
                fail("fcm-token.jwt.iat.future", "invalid_grant", times)
            if exp <= now:
                fail("fcm-token.jwt.exp", "invalid_grant", times)

    @staticmethod
    def token_audience_hint() -> str:
        return "the token_uri, an https URL whose path is /token"

    # --- messages:send

    def send_default_error(self, status: int) -> Response:
        table = {
            400: ("INVALID_ARGUMENT", "Request contains an invalid argument.", "INVALID_ARGUMENT"),
            401: ("UNAUTHENTICATED", "Request is missing required authentication credential.", "THIRD_PARTY_AUTH_ERROR"),
            403: ("PERMISSION_DENIED", "SenderId mismatch", "SENDER_ID_MISMATCH"),
            404: ("NOT_FOUND", "Requested entity was not found.", "UNREGISTERED"),
            429: ("RESOURCE_EXHAUSTED", "Quota exceeded for this device.", "QUOTA_EXCEEDED"),
            500: ("INTERNAL", "Internal error encountered.", "INTERNAL"),
            503: ("UNAVAILABLE", "The service is currently unavailable.", "UNAVAILABLE"),
        }
        grpc_status, message, code = table.get(status, ("UNKNOWN", "Unknown error.", "UNSPECIFIED_ERROR"))
        return fcm_error(status, grpc_status, message, code)

    def handle_send(self, request: Request) -> Outcome:
        checks = Checks()
        match = re.fullmatch(r"/v1/projects/([^/]+)/messages:send", urlsplit(request.path).path)
        body: Any = decode_json_body(request.body) if request.body else None
        key: str | None = None

        if request.method != "POST":
            checks.fail("fcm.method", google_error(404, "NOT_FOUND", "The requested URL was not found on this server."))
        if match is None:
            checks.fail("fcm.path", google_error(404, "NOT_FOUND", "The requested URL was not found on this server."))
        elif unquote(match.group(1)) != self.project:
            checks.fail("fcm.project", google_error(
                403, "PERMISSION_DENIED",
                f"Permission 'cloudmessaging.messages.create' denied on resource "
                f"'//cloudresourcemanager.googleapis.com/projects/{match.group(1)}' (or it may not exist).",
            ))

        authorization = request.header("authorization") or ""
        scheme, _, access_token = authorization.partition(" ")
        with self.state.lock:
            expires = self.state.access_tokens.get(access_token.strip())
        if scheme.lower() != "bearer" or expires is None or expires <= time.time():
            error = "" if not authorization else ', error="invalid_token"'
            checks.fail("fcm.authorization", google_error(
                401, "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                "or other valid authentication credential. See "
                "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                headers=[("www-authenticate", f'Bearer realm="https://accounts.google.com/"{error}')],
            ))

        content_type = (request.header("content-type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            checks.fail("fcm.content-type", bad_request("", "Invalid JSON payload received. Content-Type must be application/json."))
        if not isinstance(body, dict):
            checks.fail("fcm.body.json", bad_request("", "Invalid JSON payload received. Unexpected token."))
        else:
            self.check_fields(body, "request", "", checks)
            message = body.get("message")
            if not isinstance(message, dict):
                checks.fail("fcm.message", bad_request("message", "Invalid value at 'message': a message is required"))
            else:
                key = self.check_message(message, checks)

        project = self.project

        def success() -> Response:
            validate_only = isinstance(body, dict) and (body.get("validate_only") or body.get("validateOnly"))
            message_id = "fake_message_id" if validate_only else f"0:{int(time.time() * 1e6)}%{secrets.token_hex(8)}"
            return json_response(200, {"name": f"projects/{project}/messages/{message_id}"})

        return Outcome("fcm", key, body, checks, success, self.send_default_error)

    @staticmethod
    def check_fields(value: dict[str, Any], kind: str, path: str, checks: Checks) -> None:
        for name in value:
            if name not in FCM_FIELDS[kind]:
                at = f" at '{path}'" if path else ""
                checks.fail("fcm.fields", bad_request(
                    f"{path}.{name}" if path else name,
                    f'Invalid JSON payload received. Unknown name "{name}"{at}: Cannot find field.'))

    @staticmethod
    def check_string_map(value: Any, path: str, checks: Checks) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            checks.fail("fcm.string-map", bad_request(path, f"Invalid value at '{path}' (type.googleapis.com/google.protobuf.Map)"))
            return
        for index, (name, item) in enumerate(value.items()):
            if not isinstance(item, str):
                description = f"Invalid value at '{path}[{index}].value' (TYPE_STRING), {json.dumps(item)}"
                checks.fail("fcm.string-map", bad_request(f"{path}[{index}].value", description))

    def check_message(self, message: dict[str, Any], checks: Checks) -> str | None:
        self.check_fields(message, "message", "message", checks)
        targets = [name for name in ("token", "topic", "condition") if message.get(name) is not None]
        key = None
        if len(targets) != 1:
            checks.fail("fcm.target", bad_request("message", "Exactly one of token, topic or condition must be specified."))
        else:
            target = message[targets[0]]
            if not isinstance(target, str) or not target:
                checks.fail("fcm.target", bad_request(f"message.{targets[0]}", f"Invalid value at 'message.{targets[0]}' (TYPE_STRING)"))
            else:
                key = target
                if targets[0] == "token" and not re.fullmatch(r"[A-Za-z0-9_:.\-]{1,4096}", target):
                    checks.fail("fcm.token", fcm_error(400, "INVALID_ARGUMENT",
                                                       "The registration token is not a valid FCM registration token",
                                                       "INVALID_ARGUMENT"))
        self.check_string_map(message.get("data"), "message.data", checks)
        notification = message.get("notification")
        if notification is not None:
            if not isinstance(notification, dict):
                checks.fail("fcm.notification", bad_request("message.notification", "Invalid value at 'message.notification'"))
            else:
                self.check_fields(notification, "message.notification", "message.notification", checks)
                for name, value in notification.items():
                    if not isinstance(value, str):
                        checks.fail("fcm.notification", bad_request(
                            f"message.notification.{name}",
                            f"Invalid value at 'message.notification.{name}' (TYPE_STRING), {json.dumps(value)}"))
        android = message.get("android")
        if android is not None:
            if not isinstance(android, dict):
                checks.fail("fcm.android", bad_request("message.android", "Invalid value at 'message.android'"))
            else:
                self.check_fields(android, "message.android", "message.android", checks)
                ttl = android.get("ttl")
                if ttl is not None:
                    duration = re.fullmatch(r"([0-9]+)(\.[0-9]{1,9})?s", ttl) if isinstance(ttl, str) else None
                    if duration is None:
                        checks.fail("fcm.android.ttl", bad_request(
                            "message.android.ttl",
                            f"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), {json.dumps(ttl)}"))
                    elif int(duration.group(1)) > 2419200:
                        checks.fail("fcm.android.ttl", bad_request("message.android.ttl", "TTL must be at most 4 weeks"))
                priority = android.get("priority")
                if priority is not None and priority not in ("normal", "high", "NORMAL", "HIGH"):
                    checks.fail("fcm.android.priority", bad_request(
                        "message.android.priority",
                        "Invalid value at 'message.android.priority' "
                        f"(type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), {json.dumps(priority)}"))
                self.check_string_map(android.get("data"), "message.android.data", checks)
                if android.get("notification") is not None and not isinstance(android["notification"], dict):
                    checks.fail("fcm.android", bad_request("message.android.notification", "Invalid value at 'message.android.notification'"))
        apns = message.get("apns")
        if apns is not None:
            if not isinstance(apns, dict):
                checks.fail("fcm.apns", bad_request("message.apns", "Invalid value at 'message.apns'"))
            else:
                self.check_fields(apns, "message.apns", "message.apns", checks)
                self.check_string_map(apns.get("headers"), "message.apns.headers", checks)
                if apns.get("payload") is not None and not isinstance(apns["payload"], dict):
                    checks.fail("fcm.apns", bad_request("message.apns.payload", "Invalid value at 'message.apns.payload' (type.googleapis.com/google.protobuf.Struct)"))
        webpush = message.get("webpush")
        if webpush is not None:
            if not isinstance(webpush, dict):
                checks.fail("fcm.webpush", bad_request("message.webpush", "Invalid value at 'message.webpush'"))
            else:
                self.check_fields(webpush, "message.webpush", "message.webpush", checks)
                self.check_string_map(webpush.get("headers"), "message.webpush.headers", checks)
                self.check_string_map(webpush.get("data"), "message.webpush.data", checks)
                if webpush.get("notification") is not None and not isinstance(webpush["notification"], dict):
                    checks.fail("fcm.webpush", bad_request("message.webpush.notification", "Invalid value at 'message.webpush.notification' (type.googleapis.com/google.protobuf.Struct)"))
        return key


class WebPush:
    """A push service (RFC 8030) with VAPID (RFC 8292) and aes128gcm payloads (RFC 8188, 8291),
    answering as Mozilla's autopush does."""

    ERRNOS = {400: 110, 401: 109, 403: 109, 404: 102, 410: 103, 413: 104, 429: 201, 500: 999, 503: 201}

    def __init__(self, keys: Keys, state: State) -> None:
        self.keys = keys
        self.state = state

    @classmethod
    def error(cls, status: int, message: str, errno: int | None = None) -> Response:
        body = {"code": status, "errno": errno if errno is not None else cls.ERRNOS.get(status, 999),
                "error": HTTP_REASONS.get(status, "Error"), "message": message,
                "more_info": "http://autopush.readthedocs.io/en/latest/http.html#error-codes"}
        return json_response(status, body, content_type="application/json")

    def default_error(self, status: int) -> Response:
        messages = {404: "Request did not validate invalid token", 410: "Request did not validate invalid token",
                    413: "This message is intended for a constrained device and is limited in size. "
                         "Converted buffer is too long by 1 bytes",
                    429: "Too Many Requests", 503: "Service Unavailable"}
        return self.error(status, messages.get(status, HTTP_REASONS.get(status, "Error")))

    def handle(self, request: Request) -> Outcome:
        checks = Checks()
        subscription_id = urlsplit(request.path).path[len("/wp/"):]
        with self.state.lock:
            subscription = self.state.subscriptions.get(subscription_id)

        def fail(name: str, status: int, message: str, errno: int | None = None) -> None:
            checks.fail(name, self.error(status, f"{message} (failed check: {name})", errno))

        outcome = Outcome("webpush", subscription_id, None, checks, None, self.default_error)
        if subscription is None:
            outcome.not_found = self.error(404, "Request did not validate invalid token", 102)
            return outcome
        if subscription.gone:
            outcome.not_found = self.error(410, "Request did not validate invalid token", 103)
            return outcome

        if request.method != "POST":
            fail("webpush.method", 405, "Method not allowed", 999)
        ttl = request.header("ttl")
        if ttl is None:
            fail("webpush.ttl", 400, "Missing TTL header", 111)
        elif not re.fullmatch(r"[0-9]{1,10}", ttl):
            fail("webpush.ttl", 400, "Invalid TTL header", 112)
        urgency = request.header("urgency")
        if urgency is not None and urgency not in WEBPUSH_URGENCIES:
            fail("webpush.urgency", 400, "Invalid Urgency header", 112)
        topic = request.header("topic")
        if topic is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", topic):
            fail("webpush.topic", 400, "Topic must be no greater than 32 characters and use the URL and filename safe Base64 alphabet", 113)

        origin = "{0.scheme}://{0.netloc}".format(urlsplit(subscription.endpoint))
        outcome.jwt = self.check_vapid(request.header("authorization"), origin, fail)

        body = request.body
        if body:
            encoding = request.header("content-encoding")
            if encoding != "aes128gcm":
                fail("webpush.content-encoding", 400, "Unknown Content-Encoding", 110)
            if len(body) > WEBPUSH_MAX_BODY:
                fail("webpush.size", 413, f"Payload too large: {len(body)} bytes, at most {WEBPUSH_MAX_BODY}", 104)
            elif encoding == "aes128gcm":
                outcome.body = self.decrypt(body, subscription, fail)

        port_origin = origin

        def success() -> Response:
            headers = [("location", f"{port_origin}/m/{secrets.token_urlsafe(24)}")]
            if ttl is not None:
                headers.append(("ttl", ttl))
            return Response(201, headers)

        outcome.success = success
        return outcome

    def check_vapid(self, authorization: str | None, origin: str,
                    fail: Callable[..., None]) -> dict[str, Any] | None:
        if authorization is None:
            fail("webpush.authorization.present", 401, "Missing Authorization header", 109)
            return None
        match = re.fullmatch(r"\s*vapid\s+(.*)", authorization, re.IGNORECASE | re.DOTALL)
        params: dict[str, str] = {}
        if match:
            for part in match.group(1).split(","):
                name, equals, value = part.strip().partition("=")
                if equals:
                    params[name.strip().lower()] = value.strip().strip('"')
        if not match or "t" not in params or "k" not in params:
            fail("webpush.vapid.scheme", 401, "Authorization must be: vapid t=<JWT>, k=<public key>", 109)
            return None
        token, k = params["t"], params["k"]
        recorded = unverified_jwt(token)
        try:
            raw_key = b64url_decode(k)
            public_key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw_key)
            if len(raw_key) != 65:
                raise ValueError("not an uncompressed point")
        except ValueError:
            fail("webpush.vapid.k.format", 401, "k is not a base64url uncompressed P-256 point", 109)
            return recorded
        if raw_key != self.keys.vapid_public:
            # RFC 8292 section 4.2: the key is not the one the subscription was made with.
            fail("webpush.vapid.k", 403, "The key does not match the subscription's applicationServerKey", 109)
        try:
            if jwt.get_unverified_header(token).get("alg") != "ES256":
                fail("webpush.vapid.alg", 401, "The JWT must be signed with ES256", 109)
                return recorded
            claims = verify_jwt(token, public_key, "ES256")
        except jwt.PyJWTError:
            fail("webpush.vapid.signature", 401, "The JWT's signature does not verify with k", 109)
            return recorded
        if claims.get("aud") != origin:
            fail("webpush.vapid.aud", 401, f"aud must be the endpoint's origin {origin}", 109)
        exp, now = number(claims.get("exp")), time.time()
        if exp is None or exp <= now:
            fail("webpush.vapid.exp", 401, "exp is missing or past", 109)
        elif exp > now + 24 * 3600 + 60:
            fail("webpush.vapid.exp.24h", 401, "exp is more than 24 hours from now", 109)
        sub = claims.get("sub")
        if not isinstance(sub, str) or not (sub.startswith("mailto:") or sub.startswith("https://")):
            fail("webpush.vapid.sub", 401, "sub must be a mailto: or https: URL", 109)
        return recorded

    @staticmethod
    def decrypt(body: bytes, subscription: Subscription, fail: Callable[..., None]) -> Any:
        if len(body) < 21 or len(body) < 21 + body[20]:
            fail("webpush.ece.header", 400, "The aes128gcm header is truncated", 110)
            return None
        record_size = int.from_bytes(body[16:20], "big")
        key_id = body[21:21 + body[20]]
        content = body[21 + body[20]:]
        if len(key_id) != 65 or key_id[0] != 4:
            fail("webpush.ece.keyid", 400, "The keyid must be the sender's uncompressed P-256 public key", 110)
            return None
        if record_size < 18 or len(content) > record_size:
            # RFC 8291 section 4: one record, whose size rs is larger than the ciphertext.
            fail("webpush.ece.single-record", 400, "The message must be one record, rs at least its size", 110)
            return None
        try:
            plaintext: bytes = http_ece.decrypt(body, private_key=subscription.private_key,
                                                auth_secret=subscription.auth, version="aes128gcm")
        except Exception:  # http_ece raises its own and cryptography's exceptions
            fail("webpush.ece.decrypt", 400, "The payload did not decrypt with the subscription's keys", 110)
            return None
        try:
            return json.loads(plaintext)
        except (ValueError, UnicodeDecodeError):
            try:
                return plaintext.decode("utf-8")
            except UnicodeDecodeError:
                return {"base64": base64.b64encode(plaintext).decode("ascii")}


# ---------------------------------------------------------------------------------------------
# Dispatch: checks, the record, blackholes and scripts


class StandIn:
    def __init__(self, keys: Keys, state: State, project: str, token_lifetime: int, sandbox: bool,
                 log: Callable[[str], None]) -> None:
        self.state = state
        self.apns = APNs(keys, sandbox)
        self.fcm = FCM(keys, state, project, token_lifetime)
        self.webpush = WebPush(keys, state)
        self.log = log

    def route(self, request: Request) -> Outcome:
        path = urlsplit(request.path).path
        if path.startswith("/3/device/"):
            return self.apns.handle(request)
        if path.startswith("/v1/projects/"):
            return self.fcm.handle_send(request)
        if path == "/token":
            return self.fcm.handle_token(request)
        if path.startswith("/wp/"):
            return self.webpush.handle(request)
        checks = Checks()
        checks.fail("route", json_response(404, {"reason": "BadPath"}))
        return Outcome(None, None, decode_json_body(request.body), checks, None)

    def handle(self, request: Request) -> tuple[Response | None, dict[str, Any]]:
        """The answer (None: leave the request unanswered) and its entry in the record."""
        try:
            outcome = self.route(request)
        except Exception as error:  # a bug here must show, not hang the client
            checks = Checks()
            checks.fail("standin.internal", json_response(500, {"reason": f"stand-in error: {error!r}"}))
            outcome = Outcome(None, None, None, checks, None)
        entry: dict[str, Any] = {
            "service": outcome.service, "method": request.method, "path": request.path,
            "key": outcome.key, "http": request.http, "connection": request.connection.number,
            "stream": request.stream, "headers": request.header_map(), "body": outcome.body,
            "bodyLength": len(request.body), "status": None, "checks": list(outcome.checks.failed),
            "time": time.time(),
        }
        if outcome.jwt is not None:
            entry["jwt"] = outcome.jwt
        self.state.record(entry)

        response = self.answer(outcome)
        if response is not None:
            if outcome.checks.failed:
                response.headers.append(("x-standin-failed-checks", ",".join(outcome.checks.failed)))
            with self.state.lock:
                entry["status"] = response.status
                entry["response"] = {"headers": dict(response.headers), "body": decode_json_body(response.body) if response.body else None}
        failed = f" failed {','.join(outcome.checks.failed)}" if outcome.checks.failed else ""
        answered = response.status if response is not None else "no answer"
        self.log(f"{outcome.service or '-'} {request.method} {request.path} -> {answered}{failed}")
        return response, entry

    def answer(self, outcome: Outcome) -> Response | None:
        if outcome.service is not None:
            with self.state.lock:
                if outcome.service in self.state.blackholes:
                    return None
        if outcome.checks.answer is not None:
            return outcome.checks.answer
        if outcome.not_found is not None:
            return outcome.not_found
        assert outcome.service is not None and outcome.success is not None
        scripted = self.state.next_scripted(outcome.service, outcome.key)
        if scripted is None:
            return outcome.success()
        if scripted.get("blackhole"):
            return None
        status = int(scripted.get("status", 200))
        if "body" in scripted or (200 <= status < 300) or outcome.error_body is None:
            if 200 <= status < 300 and "body" not in scripted:
                response = outcome.success()
                response.status = status
            else:
                body = scripted.get("body")
                encoded = b"" if body is None else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                headers = [("content-type", "application/json")] if encoded and isinstance(body, (dict, list)) else []
                response = Response(status, headers, encoded)
                if outcome.service == "apns":
                    response.headers = [("apns-id", str(uuid.uuid4()))] + response.headers
        else:
            response = outcome.error_body(status)
        for name, value in (scripted.get("headers") or {}).items():
            response.headers = [(k, v) for k, v in response.headers if k != name.lower()]
            response.headers.append((name.lower(), str(value)))
        response.delay = float(scripted.get("delay", 0))
        return response


# ---------------------------------------------------------------------------------------------
# HTTP/2 (and HTTP/1.1) over TLS


class PushProtocol(asyncio.Protocol):
    """One TLS connection: HTTP/2 when ALPN chose h2 or the client sent the preface, otherwise
    HTTP/1.1."""

    counter = 0

    def __init__(self, standin: StandIn, max_streams: int) -> None:
        self.standin = standin
        self.max_streams = max_streams
        PushProtocol.counter += 1
        self.state = ConnectionState(PushProtocol.counter)
        self.transport: asyncio.Transport | None = None
        self.mode: str | None = None
        self.buffer = b""
        # HTTP/2
        self.conn: h2.connection.H2Connection | None = None
        self.streams: dict[int, tuple[list[tuple[str, str]], bytearray]] = {}
        self.pending: dict[int, tuple[bytes, bool]] = {}  # response data waiting for window
        self.open_responses: set[int] = set()
        # HTTP/1.1
        self.h1_busy = False
        self.h1_close = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
        if alpn == "h2":
            self.start_h2()
        elif alpn == "http/1.1":
            self.mode = "h1"

    def start_h2(self) -> None:
        self.mode = "h2"
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = h2.settings.Settings(
            client=False, initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.max_streams})
        self.conn.initiate_connection()
        self.flush()

    def data_received(self, data: bytes) -> None:
        if self.mode is None:
            self.buffer += data
            if self.buffer.startswith(H2_PREFACE[:len(self.buffer)]) and len(self.buffer) < len(H2_PREFACE):
                return
            if self.buffer.startswith(H2_PREFACE):
                self.start_h2()
            else:
                self.mode = "h1"
            data, self.buffer = self.buffer, b""
        if self.mode == "h2":
            self.h2_received(data)
        else:
            self.buffer += data
            self.h1_process()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.streams.clear()
        self.pending.clear()

    def flush(self) -> None:
        if self.conn is not None and self.transport is not None:
            outgoing = self.conn.data_to_send()
            if outgoing:
                self.transport.write(outgoing)

    # --- HTTP/2

    def h2_received(self, data: bytes) -> None:
        assert self.conn is not None
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            if self.transport is not None:
                self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                headers = [(str(name).lower(), str(value)) for name, value in event.headers]
                self.streams[event.stream_id] = (headers, bytearray())
            elif isinstance(event, h2.events.DataReceived):
                stream = self.streams.get(event.stream_id)
                if stream is not None and len(stream[1]) + len(event.data) <= MAX_REQUEST_BODY:
                    stream[1].extend(event.data)
                # The body is kept, so the window is given back at once (padding included).
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                # After the headers, the last DATA frame, or trailers (which are ignored).
                if event.stream_id in self.streams:
                    self.h2_request(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.streams.pop(event.stream_id, None)
                self.pending.pop(event.stream_id, None)
                self.open_responses.discard(event.stream_id)
            elif isinstance(event, h2.events.WindowUpdated):
                for stream_id in list(self.pending):
                    self.h2_send_pending(stream_id)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.flush()
                if self.transport is not None:
                    self.transport.close()
                return
        self.flush()

    def h2_request(self, stream_id: int) -> None:
        headers, body = self.streams.pop(stream_id)
        pseudo = {name: value for name, value in headers if name.startswith(":")}
        request = Request(
            method=pseudo.get(":method", ""), path=pseudo.get(":path", ""),
            authority=pseudo.get(":authority", ""), headers=headers, body=bytes(body),
            http="2", connection=self.state, stream=stream_id,
        )
        response, _ = self.standin.handle(request)
        if response is None:
            return  # blackholed: the stream stays open, never answered
        self.open_responses.add(stream_id)
        if response.delay > 0:
            asyncio.get_running_loop().call_later(response.delay, self.h2_respond, stream_id, response)
        else:
            self.h2_respond(stream_id, response)

    def h2_respond(self, stream_id: int, response: Response) -> None:
        if self.conn is None or self.transport is None or stream_id not in self.open_responses:
            return
        headers = [(":status", str(response.status))] + response.headers
        if response.body:
            headers.append(("content-length", str(len(response.body))))
        try:
            self.conn.send_headers(stream_id, headers, end_stream=not response.body)
        except h2.exceptions.ProtocolError:  # the client reset or closed the stream meanwhile
            self.open_responses.discard(stream_id)
            return
        if response.body:
            self.pending[stream_id] = (response.body, True)
            self.h2_send_pending(stream_id)
        else:
            self.open_responses.discard(stream_id)
        self.flush()

    def h2_send_pending(self, stream_id: int) -> None:
        """Sends as much of a response body as the flow-control windows allow."""
        assert self.conn is not None
        data, _ = self.pending[stream_id]
        try:
            while data:
                window = self.conn.local_flow_control_window(stream_id)
                size = min(window, self.conn.max_outbound_frame_size, len(data))
                if size <= 0:
                    break
                self.conn.send_data(stream_id, data[:size], end_stream=size == len(data))
                data = data[size:]
        except h2.exceptions.ProtocolError:
            data = b""
        if data:
            self.pending[stream_id] = (data, True)
        else:
            self.pending.pop(stream_id, None)
            self.open_responses.discard(stream_id)
        self.flush()

    # --- HTTP/1.1: one request at a time on a connection, Content-Length or chunked bodies

    def h1_process(self) -> None:
        while not self.h1_busy and self.transport is not None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            lines = head.split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                self.transport.close()
                return
            headers = []
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers.append((name.strip().lower(), value.strip()))
            header_map = dict(headers)
            rest = self.buffer[end + 4:]
            if header_map.get("transfer-encoding", "").lower() == "chunked":
                parsed = self.h1_chunked(rest)
                if parsed is None:
                    return
                body, rest = parsed
            else:
                length = int(header_map.get("content-length", "0") or 0)
                if len(rest) < length:
                    return
                body, rest = rest[:length], rest[length:]
            self.buffer = rest
            self.h1_close = header_map.get("connection", "").lower() == "close"
            pseudo = [(":method", parts[0]), (":path", parts[1]), (":authority", header_map.get("host", ""))]
            request = Request(method=parts[0], path=parts[1], authority=header_map.get("host", ""),
                              headers=pseudo + headers, body=body, http="1.1", connection=self.state, stream=0)
            response, _ = self.standin.handle(request)
            if response is None:
                self.h1_busy = True  # blackholed: this connection answers nothing more
                return
            if response.delay > 0:
                self.h1_busy = True
                asyncio.get_running_loop().call_later(response.delay, self.h1_respond, response)
                return
            self.h1_respond(response)

    @staticmethod
    def h1_chunked(data: bytes) -> tuple[bytes, bytes] | None:
        body = bytearray()
        while True:
            line_end = data.find(b"\r\n")
            if line_end < 0:
                return None
            size = int(data[:line_end].split(b";")[0], 16)
            if size == 0:
                trailer_end = data.find(b"\r\n\r\n", line_end)
                if data[line_end:line_end + 4] == b"\r\n\r\n":
                    return bytes(body), data[line_end + 4:]
                if trailer_end < 0:
                    return None
                return bytes(body), data[trailer_end + 4:]
            if len(data) < line_end + 2 + size + 2:
                return None
            body.extend(data[line_end + 2:line_end + 2 + size])
            data = data[line_end + 2 + size + 2:]

    def h1_respond(self, response: Response) -> None:
        if self.transport is None:
            return
        lines = [f"HTTP/1.1 {response.status} {HTTP_REASONS.get(response.status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in response.headers]
        lines.append(f"content-length: {len(response.body)}")
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
        if self.h1_close:
            self.transport.close()
            return
        self.h1_busy = False
        self.h1_process()


# ---------------------------------------------------------------------------------------------
# The control API: plain HTTP on loopback


def control_handler(state: State, host: str, port_of: Callable[[], int], log: Callable[[str], None]) -> type[BaseHTTPRequestHandler]:
    class Control(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def reply(self, status: int, body: Any) -> None:
            encoded = json.dumps(body, indent=None).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

        def read_json(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw.strip() else {}

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/received":
                with state.lock:
                    entries = json.loads(json.dumps(state.received))
                if "service" in query:
                    entries = [entry for entry in entries if entry["service"] in query["service"]]
                if "since" in query:
                    entries = [entry for entry in entries if entry["seq"] > int(query["since"][0])]
                self.reply(200, entries)
            elif url.path == "/subscriptions":
                with state.lock:
                    listed = [dict(s.to_json(), id=s.id, gone=s.gone) for s in state.subscriptions.values()]
                self.reply(200, listed)
            elif url.path == "/counts":
                # What each service answered, by status ("none": not answered yet), without the
                # requests themselves: cheap to poll while a benchmark pushes 100,000.
                # "last": when the newest answered request arrived (seconds since the epoch).
                counts: dict[str, dict[str, float]] = {}
                with state.lock:
                    for entry in state.received:
                        by_status = counts.setdefault(entry["service"], {})
                        status = "none" if entry["status"] is None else str(entry["status"])
                        by_status[status] = by_status.get(status, 0) + 1
                        if entry["status"] is not None:
                            by_status["last"] = max(by_status.get("last", 0.0), entry["time"])
                self.reply(200, counts)
            elif url.path == "/health":
                self.reply(200, {"ok": True})
            else:
                self.reply(404, {"error": f"no such resource: {url.path}"})

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            try:
                body = self.read_json()
            except ValueError as error:
                self.reply(400, {"error": f"the body is not JSON: {error}"})
                return
            if url.path == "/script":
                service, key, responses = body.get("service"), body.get("key"), body.get("responses")
                if service not in SERVICES or not isinstance(key, str) or not isinstance(responses, list) \
                        or not all(isinstance(r, dict) for r in responses):
                    self.reply(400, {"error": 'expected {"service": one of ' + ", ".join(SERVICES)
                                     + ', "key": string, "responses": [object]}'})
                    return
                with state.lock:
                    state.scripts.setdefault((service, key), collections.deque()).extend(responses)
                    queued = len(state.scripts[(service, key)])
                self.reply(200, {"queued": queued})
            elif url.path == "/blackhole":
                service, on = body.get("service"), body.get("on", True)
                if service not in SERVICES:
                    self.reply(400, {"error": "service must be one of " + ", ".join(SERVICES)})
                    return
                with state.lock:
                    if on:
                        state.blackholes.add(service)
                    else:
                        state.blackholes.discard(service)
                    blackholes = sorted(state.blackholes)
                self.reply(200, {"blackholes": blackholes})
            elif url.path == "/subscriptions":
                subscription_id = secrets.token_urlsafe(16)
                subscription = Subscription(
                    id=subscription_id, endpoint=f"https://{host}:{port_of()}/wp/{subscription_id}",
                    private_key=ec.generate_private_key(ec.SECP256R1()), auth=secrets.token_bytes(16),
                )
                with state.lock:
                    state.subscriptions[subscription_id] = subscription
                self.reply(200, subscription.to_json())
            elif url.path == "/expire-tokens":
                with state.lock:
                    expired = len(state.access_tokens)
                    state.access_tokens.clear()
                self.reply(200, {"expired": expired})
            elif url.path == "/reset":
                with state.lock:
                    state.received.clear()
                    state.scripts.clear()
                    state.blackholes.clear()
                self.reply(200, {"reset": True})
            else:
                self.reply(404, {"error": f"no such resource: {url.path}"})

        def do_DELETE(self) -> None:
            url = urlsplit(self.path)
            if url.path.startswith("/subscriptions/"):
                subscription_id = url.path[len("/subscriptions/"):]
                with state.lock:
                    subscription = state.subscriptions.get(subscription_id)
                    if subscription is not None:
                        subscription.gone = True
                if subscription is None:
                    self.reply(404, {"error": "no such subscription"})
                else:
                    self.reply(200, {"gone": subscription_id})
            else:
                self.reply(404, {"error": f"no such resource: {url.path}"})

    return Control


# ---------------------------------------------------------------------------------------------
# The command line


def serve(args: argparse.Namespace) -> None:
    keys = Keys.load(Path(args.keys))
    state = State()
    log: Callable[[str], None] = (lambda line: None) if args.quiet else (
        lambda line: print(f"push-standin: {line}", file=sys.stderr, flush=True))
    standin = StandIn(keys, state, args.project or keys.fcm_project, args.token_lifetime, args.sandbox, log)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2", "http/1.1"])

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: PushProtocol(standin, args.max_concurrent_streams),
                                          "127.0.0.1", args.port, ssl=context)
        port = server.sockets[0].getsockname()[1]
        control = ThreadingHTTPServer(("127.0.0.1", args.control_port),
                                      control_handler(state, args.host, lambda: port, log))
        control.daemon_threads = True
        threading.Thread(target=control.serve_forever, name="control", daemon=True).start()
        print(f"ready {port} {control.server_address[1]}", flush=True)
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        control.shutdown()
        server.close()

    asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="push-standin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    keys = commands.add_parser("keys", help="write the credentials a deployment holds")
    keys.add_argument("--dir", required=True, help="where to write them (made if missing)")
    keys.add_argument("--project", default="chime-standin", help="the FCM project id")
    keys.add_argument("--token-uri", default="https://oauth2.googleapis.com/token",
                      help="the service account's token_uri (serve accepts any https URL whose path is /token)")
    run = commands.add_parser("serve", help="serve the three services and the control API")
    run.add_argument("--keys", required=True, help="a directory written by `keys`")
    run.add_argument("--cert", required=True, help="the TLS server certificate (PEM)")
    run.add_argument("--key", required=True, help="its private key (PEM)")
    run.add_argument("--port", type=int, default=0, help="the TLS port (0: a free one)")
    run.add_argument("--control-port", type=int, default=0, help="the control API's port (0: a free one)")
    run.add_argument("--project", help="the FCM project id expected in paths (default: the service account's)")
    run.add_argument("--host", default="127.0.0.1", help="the host named in Web Push endpoints")
    run.add_argument("--token-lifetime", type=int, default=3599, help="seconds an FCM access token lives")
    run.add_argument("--max-concurrent-streams", type=int, default=1000, help="the HTTP/2 SETTINGS value")
    run.add_argument("--sandbox", action="store_true", help="answer APNs successes with apns-unique-id too")
    run.add_argument("--quiet", action="store_true", help="no line on stderr for each request")
    args = parser.parse_args(argv)
    if args.command == "keys":
        make_keys(Path(args.dir), args.project, args.token_uri)
    else:
        serve(args)


if __name__ == "__main__":
    main()
