#!/usr/bin/env python3
"""Chinese-calendar test vectors for ChimeTime, from two independent implementations on PyPI.

Run from anywhere:  python3 Tests/ChimeTimeTests/Fixtures/generate_lunar_vectors.py
It makes a virtual environment of its own (/tmp/chime-lunar-venv), installs the two oracles there with pip,
re-runs itself in it and rewrites lunar_vectors.json beside itself. The output is deterministic; the tests
read only the JSON. It takes a few seconds.

The oracles:
    lunardate 0.3.0      table-driven (a packed table of month lengths and leap months per year)
    lunar-python 1.4.8   astronomical (new moons and solar terms computed from series, 6tail's "lunar")
    sxtwl 2.0.7          astronomical (the "shouxing" ephemeris, a C++ library), the arbiter

For every Chinese year whose New Year falls in the Gregorian years 1901...2099, each oracle lists the year's
months: number, leap or not, Gregorian first day, length (29 or 30). lunardate and lunar-python agree on 195
of the 199 years. On the other four a new moon falls within minutes of midnight in China and the two put
one month start a day apart; sxtwl, which agrees with both on the other 195, then decides, siding with one of them (recorded in "disagreements"):
    1933 (6th month), 1954 (11th), 1978 (8th): lunar-python and sxtwl against lunardate;
    2057 (9th month starts 2057-09-28): lunardate and sxtwl against lunar-python.
A year on which no two oracles agree stops the script.

lunar_vectors.json
    "months": [[year, month, leap (0/1), "YYYY-MM-DD" of day 1, length], ...] for every month of the table:
      the Chinese calendar itself, which the Swift test compares with ChimeTime's table from Foundation.
    "rules": the Gregorian dates (every one, 1901-02-19...2100-02-08) of RSCALE=CHINESE rules, computed
      from the oracles' months with the SKIP semantics PROTOCOL.md documents:
      - a leap month a year lacks: OMIT drops it, BACKWARD takes the month of that number, FORWARD the
        month after that one;
      - a positive BYMONTHDAY past the month's end: OMIT drops it, BACKWARD takes the month's last day,
        FORWARD the first day of the next month (dropped when the next period names that day itself);
        a negative one before day 1 is dropped;
      - DTSTART is, at 09:00 in Asia/Shanghai, the first date that lies in the period (year or month)
        that gives it, so that it matches the rule; the periods before DTSTART's are not expanded (a
        date FORWARD moves out of them into DTSTART's period is no occurrence, as in any RRULE).
"""

import datetime as dt
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = "/tmp/chime-lunar-venv"
PINS = ["lunardate==0.3.0", "lunar-python==1.4.8", "sxtwl==2.0.7"]
FIRST, LAST = 1901, 2099


def ensure_venv():
    """Re-runs this script in a virtual environment with the oracles installed."""
    if os.environ.get("CHIME_LUNAR_VENV") == "1":
        return
    python = os.path.join(VENV, "bin", "python")
    if not os.path.exists(python):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    subprocess.check_call([python, "-m", "pip", "install", "--quiet", *PINS])
    env = dict(os.environ, CHIME_LUNAR_VENV="1")
    sys.exit(subprocess.call([python, os.path.abspath(__file__)], env=env))


def months_lunardate(year):
    from lunardate import LunarDate

    leap = LunarDate.leap_month_for_year(year)
    out = []
    for month in range(1, 13):
        for is_leap in ([False, True] if leap == month else [False]):
            first = LunarDate(year, month, 1, is_leap).to_solar_date()
            try:
                LunarDate(year, month, 30, is_leap).to_solar_date()
                length = 30
            except ValueError:
                length = 29
            out.append((year, month, int(is_leap), first.isoformat(), length))
    return out


def months_lunar_python(year):
    from lunar_python import Lunar, LunarMonth, LunarYear

    leap = LunarYear.fromYear(year).getLeapMonth()
    out = []
    for month in range(1, 13):
        for is_leap in ([False, True] if leap == month else [False]):
            signed = -month if is_leap else month
            solar = Lunar.fromYmd(year, signed, 1).getSolar()
            first = dt.date(solar.getYear(), solar.getMonth(), solar.getDay())
            length = LunarMonth.fromYm(year, signed).getDayCount()
            out.append((year, month, int(is_leap), first.isoformat(), length))
    return out


def months_sxtwl():
    """sxtwl's months, by Chinese year, read day by day (a month starts where its number or leap changes)."""
    import sxtwl

    by_year = {}
    day = dt.date(FIRST, 1, 1)
    previous = None
    year = None
    while day < dt.date(LAST + 1, 12, 31):
        d = sxtwl.fromSolar(day.year, day.month, day.day)
        key = (d.getLunarMonth(), bool(d.isLunarLeap()))
        if key != previous and previous is not None:
            assert d.getLunarDay() == 1, (day, key, d.getLunarDay())
            if key == (1, False):
                year = day.year
            if year is not None:
                by_year.setdefault(year, []).append([year, key[0], int(key[1]), day, 0])
        if year is not None:
            by_year[year][-1][4] += 1
        previous = key
        day += dt.timedelta(days=1)
    return {y: [(a, b, c, d.isoformat(), n) for a, b, c, d, n in months] for y, months in by_year.items()}


def table():
    months = []
    disagreements = []
    third = months_sxtwl()
    for year in range(FIRST, LAST + 1):
        a = months_lunardate(year)
        b = months_lunar_python(year)
        c = third[year]
        if a == b:
            if c != a:
                sys.exit(f"{year}: sxtwl disagrees with the two others:\n both {a}\n sxtwl {c}")
            months.extend(a)
            continue
        if c not in (a, b):
            sys.exit(f"{year}: no two oracles agree:\n lunardate {a}\n lunar-python {b}\n sxtwl {c}")
        differ = [x for x, y in zip(a, b) if x != y]
        disagreements.append({
            "year": year,
            "lunardate": [list(x) for x in a if x not in b],
            "lunar-python": [list(x) for x in b if x not in a],
            "decided by sxtwl for": "lunardate" if c == a else "lunar-python",
        })
        print(f"{year}: lunardate and lunar-python differ on {len(differ)} months; sxtwl sides with "
              f"{disagreements[-1]['decided by sxtwl for']}", file=sys.stderr)
        months.extend(c)
    # The months follow each other without gaps.
    for m, n in zip(months, months[1:]):
        assert dt.date.fromisoformat(m[3]) + dt.timedelta(days=m[4]) == dt.date.fromisoformat(n[3]), (m, n)
    return months, disagreements


class Calendar:
    """The oracles' months, indexed for the rule expansion below."""

    def __init__(self, months):
        self.months = [(y, m, bool(leap), dt.date.fromisoformat(first), length) for y, m, leap, first, length in months]
        self.by_year = {}
        for i, month in enumerate(self.months):
            self.by_year.setdefault(month[0], []).append(i)

    def day(self, i, n):
        """Day n (1-based) of month i."""
        return self.months[i][3] + dt.timedelta(days=n - 1)


def expand(cal, freq, months, days, skip, interval=1):
    """Every date of an RSCALE=CHINESE rule whose first occurrence starts the series (see the docstring).

    months: BYMONTH as (number, leap) pairs ([] for all, with FREQ=MONTHLY a filter); days: BYMONTHDAY."""
    def names_first(i):
        length = cal.months[i][4]
        return not days or 1 in days or -length in days

    def selected(i):
        return not months or (cal.months[i][1], cal.months[i][2]) in months

    def days_of(i, next_first):
        y, m, leap, first, length = cal.months[i]
        out = []
        for n in days:
            if n > 0 and n <= length:
                out.append(cal.day(i, n))
            elif n < 0 and -n <= length:
                out.append(cal.day(i, length + n + 1))
            elif n > 0 and skip == "BACKWARD":
                out.append(cal.day(i, length))
            elif n > 0 and skip == "FORWARD":
                moved = first + dt.timedelta(days=length)
                if moved != next_first:
                    out.append(moved)
        return out

    periods = []  # (the months of the period, its dates)
    if freq == "YEARLY":
        years = sorted(cal.by_year)
        for k in range(0, len(years), interval):
            year = years[k]
            indexes = cal.by_year[year]
            chosen = []
            for number, leap in sorted(months, key=lambda p: (p[0], p[1])):
                found = [i for i in indexes if cal.months[i][1:3] == (number, leap)]
                if found:
                    chosen.append(found[0])
                elif skip != "OMIT":
                    namesake = [i for i in indexes if cal.months[i][1:3] == (number, False)][0]
                    chosen.append(namesake if skip == "BACKWARD" else namesake + 1)
            next_first = None
            if skip == "FORWARD" and interval == 1 and year + 1 in cal.by_year:
                n = cal.by_year[year + 1][0]
                if selected(n) and names_first(n):
                    next_first = cal.months[n][3]
            dates = []
            for i in chosen:
                if i < len(cal.months):
                    dates.extend(days_of(i, next_first))
            periods.append((indexes, dates))
    else:
        for i in range(0, len(cal.months), interval):
            if not selected(i):
                continue
            next_first = None
            if skip == "FORWARD" and interval == 1 and i + 1 < len(cal.months):
                if selected(i + 1) and names_first(i + 1):
                    next_first = cal.months[i + 1][3]
            periods.append(([i], days_of(i, next_first)))

    def inside(indexes, d):
        first = cal.months[indexes[0]][3]
        last = cal.months[indexes[-1]]
        return first <= d < last[3] + dt.timedelta(days=last[4])

    for k, (indexes, dates) in enumerate(periods):
        own = sorted(d for d in dates if inside(indexes, d))
        if own:
            start = own[0]
            return sorted({d for _, later in periods[k:] for d in later if d >= start})
    return []


def month_text(months):
    return ",".join(f"{n}{'L' if leap else ''}" for n, leap in months)


def rules(cal):
    cases = [
        # (label, FREQ, BYMONTH, BYMONTHDAY, SKIP)
        ("Spring Festival", "YEARLY", [(1, False)], [1], "OMIT"),
        ("Lantern Festival", "YEARLY", [(1, False)], [15], "OMIT"),
        ("Dragon Boat", "YEARLY", [(5, False)], [5], "OMIT"),
        ("Qixi", "YEARLY", [(7, False)], [7], "OMIT"),
        ("Mid-Autumn", "YEARLY", [(8, False)], [15], "OMIT"),
        ("Double Ninth", "YEARLY", [(9, False)], [9], "OMIT"),
        ("New Year's Eve", "YEARLY", [(12, False)], [-1], "OMIT"),
        ("12-30 omitted in short years", "YEARLY", [(12, False)], [30], "OMIT"),
        ("12-30 or the last day", "YEARLY", [(12, False)], [30], "BACKWARD"),
        ("12-30 or New Year", "YEARLY", [(12, False)], [30], "FORWARD"),
        ("lunar birthday 4L-3 in leap years only", "YEARLY", [(4, True)], [3], "OMIT"),
        ("lunar birthday 4L-3, else 4-3", "YEARLY", [(4, True)], [3], "BACKWARD"),
        ("lunar birthday 4L-3, else 5-3", "YEARLY", [(4, True)], [3], "FORWARD"),
        ("lunar birthday 6L-30, else the month's end", "YEARLY", [(6, True)], [30], "BACKWARD"),
        ("both 2 and 2L", "YEARLY", [(2, False), (2, True)], [10], "OMIT"),
        ("every 30th of the 1st, 2nd, 3rd, 11th month", "YEARLY",
         [(1, False), (2, False), (3, False), (11, False)], [30], "OMIT"),
        ("every first day of a month (new moon)", "MONTHLY", [], [1], "OMIT"),
        ("every 15th", "MONTHLY", [], [15], "OMIT"),
        ("every 30th, 30-day months only", "MONTHLY", [], [30], "OMIT"),
        ("every 30th or the month's end", "MONTHLY", [], [30], "BACKWARD"),
        ("every 1st and 30th, 30th forward", "MONTHLY", [], [1, 30], "FORWARD"),
        ("every last day", "MONTHLY", [], [-1], "OMIT"),
        ("the 29th-to-last day (2nd or 1st)", "MONTHLY", [], [-29], "OMIT"),
        ("leap months only, 1st", "MONTHLY", [(n, True) for n in range(1, 13)], [1], "OMIT"),
    ]
    for leap in range(1, 13):
        cases.append((f"{leap}L-1 in leap years", "YEARLY", [(leap, True)], [1], "OMIT"))
    out = []
    for label, freq, months, days, skip in cases:
        dates = expand(cal, freq, months, days, skip)
        parts = ["RSCALE=CHINESE", f"FREQ={freq}"]
        if months:
            parts.append(f"BYMONTH={month_text(months)}")
        parts.append("BYMONTHDAY=" + ",".join(map(str, days)))
        if skip != "OMIT":
            parts.append(f"SKIP={skip}")
        out.append({
            "label": label,
            "rule": ";".join(parts),
            "start": dates[0].isoformat() + "T09:00:00" if dates else None,
            "zone": "Asia/Shanghai",
            "dates": [d.isoformat() for d in dates],
        })
    return out


def main():
    ensure_venv()
    months, disagreements = table()
    cal = Calendar(months)
    vectors = {
        "oracles": PINS,
        "years": [FIRST, LAST],
        "disagreements": disagreements,
        "months": [list(m) for m in months],
        "rules": rules(cal),
    }
    path = os.path.join(HERE, "lunar_vectors.json")
    with open(path, "w") as f:
        json.dump(vectors, f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(months)} months, {len(vectors['rules'])} rules, "
          f"{sum(len(r['dates']) for r in vectors['rules'])} dates -> {path}")


if __name__ == "__main__":
    main()
