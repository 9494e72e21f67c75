"""The operations on one device's notifications, written once for every client that has them:
:class:`DeviceOperations` (``NotificationCenter`` and a ``Backend``'s device handle) and
:class:`AsyncDeviceOperations` (``AsyncNotificationCenter`` and an ``AsyncBackend``'s). Each
method builds its operation from ``_ops``; the class says how a command reaches chimed
(:meth:`_run`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, Unpack

from . import _ops
from ._ops import ALL, Match, Ops, Selector
from ._wire import Seconds
from .models import (
    AckResult,
    Badge,
    DeviceChanges,
    DeviceSettings,
    HistoryEntry,
    Inbox,
    NotificationRequest,
    PendingNotification,
    ScheduledNotification,
    UpdatedNotification,
    UpdateFields,
)
from .triggers import Trigger

T = TypeVar("T")


def effective(timeout: float | None, retries: int | None, default_timeout: float,
              default_retries: int) -> tuple[float, int]:
    """A call's timeout and retries: those given, else the client's."""
    return (default_timeout if timeout is None else timeout, default_retries if retries is None else retries)


class DeviceOperations(ABC):
    """Every command of one device, blocking. Each call waits for chimed's reply at most
    ``timeout`` seconds (the client's by default) and then resends the exact same bytes up to
    ``retries`` times, then raises :class:`~chime_client.ChimeTimeoutError`; error replies raise
    :class:`~chime_client.ChimeError` with the protocol's ``code``."""

    #: The device whose notifications these are.
    device_id: str

    @abstractmethod
    def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        """Carries out an operation's commands for :attr:`device_id`."""

    # Scheduling

    def add(self, request: NotificationRequest, *, timeout: float | None = None,
            retries: int | None = None) -> ScheduledNotification:
        """Schedules the request (``add(_:withCompletionHandler:)``); an identifier that is
        pending is replaced. Returns when its first delivery is due."""
        return self._run(_ops.add(request), timeout, retries)

    def add_all(self, requests: Sequence[NotificationRequest], *, replacing: Selector | None = None,
                timeout: float | None = None, retries: int | None = None) -> list[ScheduledNotification]:
        """Schedules up to 1000 requests atomically, first removing what ``replacing`` selects
        (ids, ``Match({...})`` or ``ALL``) in the same step."""
        return self._run(_ops.add_all(requests, replacing), timeout, retries)

    def pending_notification_requests(self, matching: Mapping[str, Any] | None = None, *, page_size: int = 100,
                                      timeout: float | None = None,
                                      retries: int | None = None) -> list[PendingNotification]:
        """Every notification of the device (or those whose userInfo matches), by id, following
        the list's pages."""
        return self._run(_ops.pending(matching, page_size), timeout, retries)

    def remove_pending(self, identifiers: Selector, *, timeout: float | None = None,
                       retries: int | None = None) -> list[str]:
        """``removePendingNotificationRequests(withIdentifiers:)``; returns the ids removed
        (unknown ids are not an error)."""
        return self._run(_ops.change("cancel", identifiers), timeout, retries)

    def remove_matching(self, user_info: Mapping[str, Any], *, timeout: float | None = None,
                        retries: int | None = None) -> list[str]:
        """Removes every notification whose userInfo has these keys and values."""
        return self._run(_ops.change("cancel", Match(user_info)), timeout, retries)

    def remove_all_pending(self, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """``removeAllPendingNotificationRequests()``."""
        return self._run(_ops.change("cancel", ALL), timeout, retries)

    def pause(self, which: Selector, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """Keeps the selected notifications but stops them firing."""
        return self._run(_ops.change("pause", which), timeout, retries)

    def resume(self, which: Selector, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """Re-arms paused notifications from now (a one-shot whose time passed fires at once)."""
        return self._run(_ops.change("resume", which), timeout, retries)

    def update(self, identifier: str, *, trigger: Trigger | None = None, timeout: float | None = None,
               retries: int | None = None, **fields: Unpack[UpdateFields]) -> UpdatedNotification:
        """Changes only the given fields of a pending notification (``None`` clears one); a new
        ``trigger`` replaces its schedule. ``enabled`` and its counters stay unless given.
        An unknown identifier raises ``not_found``."""
        return self._run(_ops.update(identifier, trigger, fields), timeout, retries)

    def preview(self, target: NotificationRequest | str, *, count: int = 10, start: datetime | None = None,
                timeout: float | None = None, retries: int | None = None) -> list[datetime]:
        """The next ``count`` instants a request, or the pending notification with this id,
        would fire at or after ``start`` (an aware datetime, default now). Changes nothing."""
        return self._run(_ops.preview(target, count, start), timeout, retries)

    def snooze(self, identifier: str, after: Seconds, *, timeout: float | None = None,
               retries: int | None = None) -> datetime | None:
        """Delivers the notification's content once more ``after`` seconds from now; returns when."""
        return self._run(_ops.snooze(identifier, after), timeout, retries)

    # The device

    def device_settings(self, *, timeout: float | None = None, retries: int | None = None) -> DeviceSettings:
        """The device's zone, badge, quiet hours, pending count, receipts and history."""
        return self._run(_ops.device({}), timeout, retries)

    def update_device_settings(self, *, timeout: float | None = None, retries: int | None = None,
                               **changes: Unpack[DeviceChanges]) -> DeviceSettings:
        """Sets what is given (``time_zone``, ``badge``, ``quiet_hours`` (``None`` clears them),
        ``receipts``, ``history``) and returns the device."""
        return self._run(_ops.device(changes), timeout, retries)

    # Receipts

    def ack(self, fire_ids: str | Sequence[str], badge: int | Badge | None = None, *, timeout: float | None = None,
            retries: int | None = None) -> AckResult:
        """Acknowledges deliveries, taking them out of the inbox; ``badge`` changes the device's
        counter in the same step, once, if any of them was new."""
        return self._run(_ops.ack(fire_ids, badge), timeout, retries)

    def inbox(self, *, page_size: int = 100, timeout: float | None = None, retries: int | None = None) -> Inbox:
        """Every unacknowledged delivery, oldest first, following the inbox's pages."""
        return self._run(_ops.inbox(page_size), timeout, retries)

    def history(self, since: datetime | None = None, limit: int | None = None, *, timeout: float | None = None,
                retries: int | None = None) -> list[HistoryEntry]:
        """Whether each recent delivery reached the device, newest first."""
        return self._run(_ops.history(since, limit), timeout, retries)

    def command(self, op: str, payload: Mapping[str, Any], *, timeout: float | None = None,
                retries: int | None = None) -> dict[str, Any]:
        """Any command of PROTOCOL.md as raw JSON: its ``result`` object."""
        return self._run(_ops.command(op, payload), timeout, retries)


class AsyncDeviceOperations(ABC):
    """Every method of :class:`DeviceOperations` as a coroutine, with the same timeouts, retries
    and errors."""

    #: The device whose notifications these are.
    device_id: str

    @abstractmethod
    async def _run(self, ops: Ops[T], timeout: float | None, retries: int | None) -> T:
        """Carries out an operation's commands for :attr:`device_id`."""

    # Scheduling

    async def add(self, request: NotificationRequest, *, timeout: float | None = None,
                  retries: int | None = None) -> ScheduledNotification:
        """See :meth:`NotificationCenter.add`."""
        return await self._run(_ops.add(request), timeout, retries)

    async def add_all(self, requests: Sequence[NotificationRequest], *, replacing: Selector | None = None,
                      timeout: float | None = None, retries: int | None = None) -> list[ScheduledNotification]:
        """See :meth:`NotificationCenter.add_all`."""
        return await self._run(_ops.add_all(requests, replacing), timeout, retries)

    async def pending_notification_requests(self, matching: Mapping[str, Any] | None = None, *,
                                            page_size: int = 100, timeout: float | None = None,
                                            retries: int | None = None) -> list[PendingNotification]:
        """See :meth:`NotificationCenter.pending_notification_requests`."""
        return await self._run(_ops.pending(matching, page_size), timeout, retries)

    async def remove_pending(self, identifiers: Selector, *, timeout: float | None = None,
                             retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.remove_pending`."""
        return await self._run(_ops.change("cancel", identifiers), timeout, retries)

    async def remove_matching(self, user_info: Mapping[str, Any], *, timeout: float | None = None,
                              retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.remove_matching`."""
        return await self._run(_ops.change("cancel", Match(user_info)), timeout, retries)

    async def remove_all_pending(self, *, timeout: float | None = None, retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.remove_all_pending`."""
        return await self._run(_ops.change("cancel", ALL), timeout, retries)

    async def pause(self, which: Selector, *, timeout: float | None = None,
                    retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.pause`."""
        return await self._run(_ops.change("pause", which), timeout, retries)

    async def resume(self, which: Selector, *, timeout: float | None = None,
                     retries: int | None = None) -> list[str]:
        """See :meth:`NotificationCenter.resume`."""
        return await self._run(_ops.change("resume", which), timeout, retries)

    async def update(self, identifier: str, *, trigger: Trigger | None = None, timeout: float | None = None,
                     retries: int | None = None, **fields: Unpack[UpdateFields]) -> UpdatedNotification:
        """See :meth:`NotificationCenter.update`."""
        return await self._run(_ops.update(identifier, trigger, fields), timeout, retries)

    async def preview(self, target: NotificationRequest | str, *, count: int = 10, start: datetime | None = None,
                      timeout: float | None = None, retries: int | None = None) -> list[datetime]:
        """See :meth:`NotificationCenter.preview`."""
        return await self._run(_ops.preview(target, count, start), timeout, retries)

    async def snooze(self, identifier: str, after: Seconds, *, timeout: float | None = None,
                     retries: int | None = None) -> datetime | None:
        """See :meth:`NotificationCenter.snooze`."""
        return await self._run(_ops.snooze(identifier, after), timeout, retries)

    # The device

    async def device_settings(self, *, timeout: float | None = None, retries: int | None = None) -> DeviceSettings:
        """See :meth:`NotificationCenter.device_settings`."""
        return await self._run(_ops.device({}), timeout, retries)

    async def update_device_settings(self, *, timeout: float | None = None, retries: int | None = None,
                                     **changes: Unpack[DeviceChanges]) -> DeviceSettings:
        """See :meth:`NotificationCenter.update_device_settings`."""
        return await self._run(_ops.device(changes), timeout, retries)

    # Receipts

    async def ack(self, fire_ids: str | Sequence[str], badge: int | Badge | None = None, *,
                  timeout: float | None = None, retries: int | None = None) -> AckResult:
        """See :meth:`NotificationCenter.ack`."""
        return await self._run(_ops.ack(fire_ids, badge), timeout, retries)

    async def inbox(self, *, page_size: int = 100, timeout: float | None = None,
                    retries: int | None = None) -> Inbox:
        """See :meth:`NotificationCenter.inbox`."""
        return await self._run(_ops.inbox(page_size), timeout, retries)

    async def history(self, since: datetime | None = None, limit: int | None = None, *,
                      timeout: float | None = None, retries: int | None = None) -> list[HistoryEntry]:
        """See :meth:`NotificationCenter.history`."""
        return await self._run(_ops.history(since, limit), timeout, retries)

    async def command(self, op: str, payload: Mapping[str, Any], *, timeout: float | None = None,
                      retries: int | None = None) -> dict[str, Any]:
        """See :meth:`NotificationCenter.command`."""
        return await self._run(_ops.command(op, payload), timeout, retries)
