"""Shift the wall clock by SHIFT_DAYS days, to run the tests on another day (``make test-days``).

A model test whose prompt carries the day (a recalled turn reads "[6 December 2026] user: ...") may pass on the day
it was written and fail on another: the greedy answer reads the day. Two such tests were found only when a day
changed. This is a pytest plugin (``-p shift_days``, with this folder on PYTHONPATH); this folder's
sitecustomize.py imports it too, so Python subprocesses that inherit PYTHONPATH and SHIFT_DAYS see the same day.

What is shifted (the clock keeps ticking, real time + N*86400 s):
  * time.time / time.time_ns, and time.localtime / gmtime / ctime / asctime / strftime when given no time;
  * datetime.now / utcnow / today and date.today as seen by localpager's modules that import them
    (localpager.core.dates, .store.export_formats, .memory.history: the only ones with `from datetime import`):
    their module globals `datetime` / `date` are replaced, right after the module executes, by subclasses whose
    now()/today() read the shifted time.time and whose constructors return ordinary datetime/date objects.
Not shifted: time.monotonic / perf_counter (no epoch), file mtimes, C code, non-localpager uses of datetime.now,
subprocesses whose environment drops PYTHONPATH or SHIFT_DAYS. SHIFT_DAYS unset or 0: nothing is patched.
"""

from __future__ import annotations

import datetime as _dt
import importlib.abc
import os
import sys
import time as _time

try:
    DAYS = int(os.environ.get("SHIFT_DAYS", "0") or 0)
except ValueError:
    raise SystemExit(f"SHIFT_DAYS must be a whole number of days, got {os.environ['SHIFT_DAYS']!r}") from None
OFFSET = DAYS * 86400
TARGETS = ("localpager.core.dates", "localpager.store.export_formats", "localpager.memory.history")
# SHIFT_DAYS_TRACE=1: also record, per test, the day labels the prompts show (format_day / format_time as
# localpager.runtime.prompts and localpager.core.facts call them), to check that the shifted day reaches the model
TRACE = os.environ.get("SHIFT_DAYS_TRACE") == "1"
TRACED = ("localpager.runtime.prompts", "localpager.core.facts")
_current_test = ["(outside a test)"]
_seen: dict = {}  # test id -> set of labels shown

real_time, real_time_ns = _time.time, _time.time_ns
real_localtime, real_gmtime, real_ctime = _time.localtime, _time.gmtime, _time.ctime
real_asctime, real_strftime = _time.asctime, _time.strftime
real_datetime, real_date = _dt.datetime, _dt.date


def shifted_time() -> float:
    return real_time() + OFFSET


def shifted_time_ns() -> int:
    return real_time_ns() + OFFSET * 1_000_000_000


def _localtime(secs=None):
    return real_localtime(shifted_time() if secs is None else secs)


def _gmtime(secs=None):
    return real_gmtime(shifted_time() if secs is None else secs)


def _ctime(secs=None):
    return real_ctime(shifted_time() if secs is None else secs)


def _asctime(t=None):
    return real_asctime(_localtime() if t is None else t)


def _strftime(fmt, t=None):
    return real_strftime(fmt, _localtime() if t is None else t)


class _DatetimeMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, real_datetime)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, real_datetime)


class _DateMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, real_date)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, real_date)


class ShiftedDatetime(real_datetime, metaclass=_DatetimeMeta):
    def __new__(cls, *args, **kwargs):  # datetime(...), and fromisoformat() & co on this class: plain datetimes
        return real_datetime(*args, **kwargs)

    @classmethod
    def now(cls, tz=None):
        return real_datetime.fromtimestamp(shifted_time(), tz)

    @classmethod
    def today(cls):
        return real_datetime.fromtimestamp(shifted_time())

    @classmethod
    def utcnow(cls):
        return real_datetime.utcfromtimestamp(shifted_time())


class ShiftedDate(real_date, metaclass=_DateMeta):
    def __new__(cls, *args, **kwargs):
        return real_date(*args, **kwargs)

    @classmethod
    def today(cls):
        return real_date.fromtimestamp(shifted_time())


def _traced(fn):
    def wrapper(value, *a, **k):
        out = fn(value, *a, **k)
        if out:
            _seen.setdefault(_current_test[0], set()).add(str(out))
        return out
    wrapper.__wrapped__ = fn
    return wrapper


def _patch_module(module) -> None:
    if TRACE and module.__name__ in TRACED:
        for name in ("format_day", "format_time"):
            if callable(getattr(module, name, None)) and not hasattr(getattr(module, name), "__wrapped__"):
                setattr(module, name, _traced(getattr(module, name)))
        return
    for name, value in list(vars(module).items()):
        if value is real_datetime:
            setattr(module, name, ShiftedDatetime)
        elif value is real_date:
            setattr(module, name, ShiftedDate)


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a target module, wraps the real loader so its globals are patched once it ran."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in TARGETS and not (TRACE and fullname in TRACED):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                loader = spec.loader
                exec_module = loader.exec_module

                class Loader(importlib.abc.Loader):
                    def create_module(self, spec):
                        return loader.create_module(spec)

                    def exec_module(self, module):
                        exec_module(module)
                        _patch_module(module)

                spec.loader = Loader()
                return spec
        return None


def install() -> None:
    if not OFFSET or getattr(_time, "_shift_days_installed", False):
        return
    _time.time, _time.time_ns = shifted_time, shifted_time_ns
    _time.localtime, _time.gmtime, _time.ctime = _localtime, _gmtime, _ctime
    _time.asctime, _time.strftime = _asctime, _strftime
    _time._shift_days_installed = True
    for name in TARGETS + (TRACED if TRACE else ()):  # already imported (e.g. the plugin loaded late): patch now
        if name in sys.modules:
            _patch_module(sys.modules[name])
    sys.meta_path.insert(0, _PatchAfterImport())


install()


def pytest_report_header(config):
    return f"shift_days: SHIFT_DAYS={DAYS}, today seen by localpager = {_dt.date.fromtimestamp(_time.time())}"


def pytest_runtest_setup(item):
    _current_test[0] = item.nodeid


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    terminalreporter.write_line(f"shift_days: SHIFT_DAYS={DAYS} (wall clock shifted by {OFFSET} s)")
    if TRACE:
        today = _dt.date.fromtimestamp(_time.time())
        months = "January February March April May June July August September October November December".split()
        label = f"{today.day} {months[today.month - 1]}"
        hit = sorted(t for t, labels in _seen.items() if any(label in x for x in labels))
        terminalreporter.write_line(f"shift_days trace: {len(_seen)} tests formatted a day for a prompt; "
                                    f"{len(hit)} of them showed today's shifted day ({label}):")
        for t in hit:
            terminalreporter.write_line(f"  {t}")
