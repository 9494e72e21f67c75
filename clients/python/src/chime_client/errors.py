"""The errors a Chime call raises: the protocol's error replies, timeouts and transport failures."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """The protocol's error codes (PROTOCOL.md section 4), plus the client's own three.

    ``ChimeError.code`` is a plain ``str`` (a newer server may send a code this list lacks);
    these members compare equal to it: ``err.code == ErrorCode.NOT_FOUND``.
    """

    MALFORMED_JSON = "malformed_json"
    INVALID_ARGUMENT = "invalid_argument"
    UNKNOWN_FIELD = "unknown_field"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    TIMEZONE_REQUIRED = "timezone_required"
    NEVER_FIRES = "never_fires"
    NOT_FOUND = "not_found"
    QUOTA_EXCEEDED = "quota_exceeded"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"
    #: No reply within the call's timeout (after every retry): :class:`ChimeTimeoutError`.
    TIMEOUT = "timeout"
    #: The broker could not be reached, refused us, or the center was closed:
    #: :class:`ChimeConnectionError`.
    TRANSPORT = "transport"
    #: A reply this client cannot follow: a ``list`` or ``inbox`` page whose cursor repeats an
    #: earlier one, or more pages than a device can fill (the pages would never end).
    INVALID_REPLY = "invalid_reply"


class ChimeError(Exception):
    """An error reply from chimed, or a failure to get one.

    ``code`` is the protocol's code (``invalid_argument``, ``not_found``, ...), ``field`` the
    offending field where the server names one, ``message`` the server's explanation, ``op`` the
    command's operation and ``request_id`` the requestId it carried.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        op: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.field = field
        self.op = op
        self.request_id = request_id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, field={self.field!r}, message={self.message!r})"


class ChimeTimeoutError(ChimeError, TimeoutError):
    """No reply arrived within the timeout, after every retry. The command may or may not
    have been applied: retrying it with the same bytes (``retries=``) is safe."""

    def __init__(self, message: str, *, op: str | None = None, request_id: str | None = None) -> None:
        super().__init__(ErrorCode.TIMEOUT, message, op=op, request_id=request_id)


class ChimeConnectionError(ChimeError, ConnectionError):
    """The broker could not be reached or refused the connection or a subscription, or the
    center was closed while the call waited."""

    def __init__(self, message: str, *, op: str | None = None, request_id: str | None = None) -> None:
        super().__init__(ErrorCode.TRANSPORT, message, op=op, request_id=request_id)
