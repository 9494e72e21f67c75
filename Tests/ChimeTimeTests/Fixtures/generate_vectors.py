#!/usr/bin/env python3
"""Differential test vectors for ChimeTime, computed with python-dateutil (2.9) and zoneinfo.

Run from anywhere:  python3 Tests/ChimeTimeTests/Fixtures/generate_vectors.py
It rewrites rule_vectors.json and zone_vectors.json beside itself. The output is deterministic for a
given tzdata (fixed seed); the tests read only the JSON. It takes about seven minutes: dateutil walks
rules that never fire all the way to year 9999 (each vector is cut off after 2 s and skipped).

rule_vectors.json
    dateutil expands each RRULE on the naive wall clock (it knows nothing of zones); this script then
    applies Chime's rules exactly as PROTOCOL.md section 2 and ChimeTime's Recurrence document them:
    - every wall-clock candidate (numbered 1, 2, ... in wall-clock order from DTSTART: the index, what
      COUNT limits) becomes an instant with zoneinfo and fold=0, which is RFC 5545's gap/overlap rule:
      a time in a spring-forward gap moves forward by the gap, a repeated time means its first instant;
    - a candidate landing on an instant an earlier candidate already has is dropped (it keeps its index);
    - UNTIL is compared on instants (UTC form as is, local and date forms read in the zone; a date means
      00:00:00 that day, as dateutil reads it), so dateutil is given the rule without UNTIL;
    - exdates drop the occurrence on their instant;
    - occurrences are delivered in instant order.
    Each vector lists the first occurrences after DTSTART ("expect": [index, epoch seconds]) and a few
    first(atOrAfter:) queries ("queries": [epoch seconds, index, instant] or [epoch seconds] for none),
    some of them years after DTSTART to exercise the period jump.

    Rules avoid two dateutil quirks that disagree with RFC 5545 (ChimeTime follows the RFC):
    plain and ordinal weekdays in one BYDAY (dateutil requires a day to match both), and BYWEEKNO
    values whose week straddles a year end in dateutil's approximations (52, 53 and negatives other
    than -1 are not generated). A third: dateutil's first WEEKLY period starts at DTSTART's day rather
    than at the week's start, which changes what BYSETPOS picks in that week; WEEKLY rules with BYSETPOS
    therefore get a DTSTART on their WKST day.

zone_vectors.json
    For every zone name in zoneinfo.available_timezones() (less "Factory" and "localtime") and every
    offset transition from 1970 to 2037, five wall-clock times around the transition's gap or overlap
    (lo - 1 s, lo, middle, hi - 1 s, hi, where lo/hi are the transition instant read with the smaller
    and the larger offset) and which offset zoneinfo (fold=0) reads each with: a 5-bit mask, bit i set
    when point i uses the offset from after the transition. Zones with identical transitions share one
    entry. System tzdata and Foundation's ICU tzdata are both 2025b here, and agree on every zone from
    1970 to 2037 (the test checks all of them); if a later tzdata disagrees, list the zone in
    ZONE_EXCLUDE with the reason.
"""

import datetime as dt
import functools
import json
import os
import random
import signal
import zoneinfo
from zoneinfo import _zoneinfo

from dateutil import rrule

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 5545
VECTORS = 3000
EXPECT = 8
# name -> reason, for zones where system tzdata and Foundation's ICU data disagree (both say 2025b).
ZONE_EXCLUDE = {
    "EET": "tzdata 2024b made EET a link to Europe/Athens; ICU keeps the old rule zone (no DST before 1981)",
    "WET": "tzdata 2024b made WET a link to Europe/Lisbon; ICU keeps the old rule zone",
}

RULE_ZONES = [
    "UTC", "America/New_York", "Europe/Paris", "Australia/Lord_Howe", "Australia/Sydney",
    "America/Santiago", "Asia/Shanghai", "Pacific/Apia", "Asia/Kolkata", "America/St_Johns",
    "Europe/London", "Pacific/Chatham", "Asia/Tehran", "America/Sao_Paulo", "Africa/Casablanca",
    "Europe/Moscow", "Pacific/Kiritimati", "America/Havana", "America/Nuuk", "Asia/Gaza",
]
WEEKDAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
FREQS = ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY"]
# How far after DTSTART first(atOrAfter:) queries may reach, per FREQ (days).
QUERY_SPAN = {"YEARLY": 40 * 366, "MONTHLY": 15 * 366, "WEEKLY": 6 * 366, "DAILY": 4 * 366,
              "HOURLY": 60, "MINUTELY": 2, "SECONDLY": 0.05}
MAX_CANDIDATES = 60000


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def wall_seconds(d):
    return int((d - dt.datetime(1970, 1, 1)).total_seconds())


def instant(d, zone):
    return int(d.replace(tzinfo=zone, fold=0).timestamp())


@functools.lru_cache(maxsize=None)
def transitions(name, lo=dt.datetime(1970, 1, 1), hi=dt.datetime(2038, 1, 1)):
    """(utc seconds, offset before, offset after) for each offset change of the zone in [lo, hi)."""
    z = _zoneinfo.ZoneInfo.no_cache(name)
    tz = zoneinfo.ZoneInfo(name)
    out = []
    start, end = wall_seconds(lo), wall_seconds(hi)
    for t in z._trans_utc:
        if start <= t < end:
            before = int(dt.datetime.fromtimestamp(t - 1, tz).utcoffset().total_seconds())
            after = int(dt.datetime.fromtimestamp(t, tz).utcoffset().total_seconds())
            if before != after:
                out.append((t, before, after))
    return out


def pick(rng, values, low, high):
    return sorted(set(rng.choice(values) for _ in range(rng.randint(low, high))))


def random_rule(rng):
    freq = rng.choices(FREQS, weights=[14, 18, 14, 18, 10, 5, 3])[0]
    parts = [f"FREQ={freq}"]
    if rng.random() < 0.4:
        parts.append(f"INTERVAL={rng.choice([2, 2, 3, 4, 5, 7, 12, 13, 25, 100])}")
    fine = FREQS.index(freq)
    if rng.random() < 0.3 and fine <= FREQS.index("MINUTELY"):
        parts.append("BYSECOND=" + ",".join(map(str, pick(rng, range(60), 1, 3))))
    if rng.random() < 0.3 and fine <= FREQS.index("SECONDLY"):
        parts.append("BYMINUTE=" + ",".join(map(str, pick(rng, [0, 0, 15, 30, 45, 59, 7, 30], 1, 3))))
    if rng.random() < 0.35:
        parts.append("BYHOUR=" + ",".join(map(str, pick(rng, [0, 1, 2, 2, 3, 9, 12, 17, 23], 1, 3))))
    has_weekno = freq == "YEARLY" and rng.random() < 0.2
    if rng.random() < 0.4:
        if freq in ("MONTHLY", "YEARLY") and not has_weekno and rng.random() < 0.6:
            limit = 5 if freq == "MONTHLY" or rng.random() < 0.5 else 53
            days = set()
            for _ in range(rng.randint(1, 3)):
                n = rng.choice([1, 2, 3, 4, -1, -2, limit, -limit] + list(range(1, limit + 1)))
                days.add(f"{n}{rng.choice(WEEKDAYS)}")
            parts.append("BYDAY=" + ",".join(sorted(days)))
            if limit == 53:
                parts = [p for p in parts]  # BYMONTH must not then be added (ordinals within months are -5...5)
                no_month = True
            else:
                no_month = False
        else:
            parts.append("BYDAY=" + ",".join(pick(rng, WEEKDAYS, 1, 5)))
            no_month = False
    else:
        no_month = False
    if freq != "WEEKLY" and rng.random() < 0.3:
        parts.append("BYMONTHDAY=" + ",".join(map(str, pick(rng, [1, 2, 13, 15, 28, 29, 30, 31, -1, -2, -31], 1, 3))))
    if freq in ("YEARLY", "HOURLY", "MINUTELY", "SECONDLY") and rng.random() < 0.15:
        parts.append("BYYEARDAY=" + ",".join(map(str, pick(rng, [1, 60, 100, 200, 365, 366, -1, -306, -366], 1, 3))))
    if has_weekno:
        parts.append("BYWEEKNO=" + ",".join(map(str, pick(rng, [1, 2, 10, 20, 26, 40, 51, -1], 1, 3))))
    if not no_month and rng.random() < 0.3:
        parts.append("BYMONTH=" + ",".join(map(str, pick(rng, range(1, 13), 1, 4))))
    has_by = any(p.startswith("BY") for p in parts)
    if has_by and rng.random() < 0.2:
        parts.append("BYSETPOS=" + ",".join(map(str, pick(rng, [1, 2, -1, -2, 3], 1, 2))))
    if rng.random() < 0.15:
        parts.append(f"WKST={rng.choice(WEEKDAYS)}")
    return freq, parts


def random_start(rng, zone_name):
    zone_transitions = transitions(zone_name, dt.datetime(1975, 1, 1), dt.datetime(2036, 1, 1))
    if zone_transitions and rng.random() < 0.5:
        t, before, after = rng.choice(zone_transitions)
        wall = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=t + min(before, after))
        wall += dt.timedelta(seconds=rng.randint(-3 * 3600, 3 * 3600) // 60 * 60)
        wall -= dt.timedelta(days=rng.choice([0, 0, 1, 3, 7, 30]))
    else:
        wall = dt.datetime(rng.randint(1975, 2034), rng.randint(1, 12), rng.randint(1, 28),
                           rng.randint(0, 23), rng.choice([0, 0, 30, 15, rng.randint(0, 59)]), rng.choice([0, 0, 0, 30]))
    return wall.replace(microsecond=0)


def expand(rule_text, start, zone, until_instant, exdates, horizon_wall):
    """Occurrences (index, instant) in instant order, plus whether they are all of them, and the instant
    below which the list is complete."""
    rr = rrule.rrulestr(rule_text, dtstart=start)
    kept = {}
    last_wall = None
    exhausted = True
    for index, candidate in enumerate(rr, start=1):
        if index > MAX_CANDIDATES:
            exhausted = False
            break
        last_wall = candidate
        i = instant(candidate, zone)
        if i not in kept:
            kept[i] = index
        if candidate > horizon_wall and index >= EXPECT * 3:
            exhausted = False
            break
    if exhausted:
        trusted = float("inf")
    else:
        # Later candidates land after instant(last) - gap (a gap is at most a day).
        trusted = instant(last_wall, zone) - 86400
    occurrences = sorted((i, n) for i, n in kept.items())
    occurrences = [(n, i) for i, n in occurrences
                   if (until_instant is None or i <= until_instant) and i not in exdates]
    return occurrences, exhausted, trusted


def rule_vector(rng):
    zone_name = rng.choice(RULE_ZONES)
    zone = zoneinfo.ZoneInfo(zone_name)
    freq, parts = random_rule(rng)
    start = random_start(rng, zone_name)
    if freq == "WEEKLY" and any(p.startswith("BYSETPOS") for p in parts):
        wkst = next((WEEKDAYS.index(p[5:]) for p in parts if p.startswith("WKST=")), 0)
        start -= dt.timedelta(days=(start.weekday() - wkst) % 7)
    until_text = None
    until_instant = None
    roll = rng.random()
    if roll < 0.15:
        parts.insert(1, f"COUNT={rng.choice([1, 2, 3, 5, 10, 20, 100])}")
    elif roll < 0.3:
        span = dt.timedelta(days=QUERY_SPAN[freq]) * rng.choice([0.01, 0.1, 0.5, 1])
        until = (start + span).replace(microsecond=0)
        form = rng.choice(["utc", "local", "date"])
        if form == "utc":
            until_instant = instant(until, zone)
            until_text = dt.datetime.fromtimestamp(until_instant, dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        elif form == "local":
            until_instant = instant(until, zone)
            until_text = until.strftime("%Y%m%dT%H%M%S")
        else:
            until_instant = instant(until.replace(hour=0, minute=0, second=0), zone)
            until_text = until.strftime("%Y%m%d")
    rule_text = ";".join(parts)
    full_rule = rule_text if until_text is None else rule_text + f";UNTIL={until_text}"

    span = dt.timedelta(days=QUERY_SPAN[freq])
    horizon = start + span + dt.timedelta(days=2)
    exdates = []
    occurrences, exhausted, trusted = expand(rule_text, start, zone, until_instant, set(), horizon)
    if occurrences and rng.random() < 0.3:
        for n, i in rng.sample(occurrences[:EXPECT], min(2, len(occurrences[:EXPECT]))):
            exdates.append(i)
    exdate_set = set(exdates)
    occurrences = [(n, i) for n, i in occurrences if i not in exdate_set and i < trusted]
    expect = occurrences[:EXPECT]
    start_instant = instant(start, zone)
    queries = []
    for _ in range(3):
        t = start_instant + int(rng.random() ** 2 * span.total_seconds()) - rng.choice([0, 0, 3600, 86400])
        t = t - t % rng.choice([1, 60, 3600])
        if t >= trusted:
            continue
        found = next(((n, i) for n, i in occurrences if i >= t), None)
        if found is None:
            if exhausted:
                queries.append([t])
        elif found[1] < trusted:
            queries.append([t, found[0], found[1]])
    # Local exdates in the zone (an overlap time would read as its first instant: keep only unambiguous ones).
    exdate_texts = []
    for i in exdates:
        wall = dt.datetime.fromtimestamp(i, zone).replace(tzinfo=None)
        if instant(wall, zone) == i and rng.random() < 0.5:
            exdate_texts.append(wall.strftime("%Y-%m-%dT%H:%M:%S"))
        else:
            exdate_texts.append(dt.datetime.fromtimestamp(i, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return {
        "zone": zone_name, "start": start.strftime("%Y-%m-%dT%H:%M:%S"), "rule": full_rule,
        "exdates": exdate_texts, "complete": exhausted and len(expect) == len(occurrences),
        "expect": [list(e) for e in expect], "queries": queries,
    }


def rule_vectors():
    rng = random.Random(SEED)
    out = []
    signal.signal(signal.SIGALRM, on_alarm)
    while len(out) < VECTORS:
        state = rng.getstate()
        signal.alarm(2)
        try:
            vector = rule_vector(rng)
        except (Timeout, ValueError):
            # ValueError: dateutil refuses rules whose BY parts can never meet the INTERVAL (ChimeTime gives
            # nil or searchLimit for those; the never-hangs tests cover them).
            continue
        finally:
            signal.alarm(0)
        if vector["expect"] or vector["queries"] or vector["complete"]:
            out.append(vector)
    return out


def zone_vectors():
    names = sorted(n for n in zoneinfo.available_timezones() if n not in ("Factory", "localtime"))
    shared = {}
    for name in names:
        if name in ZONE_EXCLUDE:
            continue
        tz = zoneinfo.ZoneInfo(name)
        rows = []
        for t, before, after in transitions(name):
            lo = t + min(before, after)
            hi = t + max(before, after)
            mask = 0
            for bit, wall in enumerate((lo - 1, lo, (lo + hi) // 2, hi - 1, hi)):
                d = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=wall)
                used = wall - instant(d, tz)
                assert used in (before, after), (name, t)
                if used == after:
                    mask |= 1 << bit
            rows.append(f"{t},{before},{after},{mask}")
        shared.setdefault(";".join(rows), []).append(name)
    return [{"names": names_, "transitions": key} for key, names_ in sorted(shared.items(), key=lambda kv: kv[1])]


def main():
    with open(os.path.join(HERE, "zone_vectors.json"), "w") as f:
        json.dump({"tzdata": zoneinfo.TZPATH and open("/usr/share/zoneinfo/tzdata.zi").readline().strip(),
                   "zones": zone_vectors()}, f, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(HERE, "rule_vectors.json"), "w") as f:
        f.write("[\n")
        vectors = rule_vectors()
        f.write(",\n".join(json.dumps(v, separators=(",", ":")) for v in vectors))
        f.write("\n]\n")


if __name__ == "__main__":
    main()
