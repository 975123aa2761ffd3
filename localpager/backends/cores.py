"""How many cores other work leaves free: the default thread count of llama.cpp and the embedder.

llama.cpp's threads spin while they wait, so taking a core another program keeps busy costs far more than it
gives (``benchmarks/threads.py``). The busy cores are read from the CPU time the kernel counts (``/proc/stat``,
for this process's own cores, less this process's time) over a tenth of a second. The one-minute load average,
which this used to read, counts tasks that use no CPU (kernel threads in uninterruptible sleep): on an idle
two-core VM it sat at 0.5-1.0 while both cores were 99.8% idle, and the default took one thread of two.
Where ``/proc/stat`` is missing (macOS, Windows) the load average is still what is read.
"""

from __future__ import annotations

import os
import threading
import time

SAMPLE_S = 0.1  # long enough for a busy core to show as 10 clock ticks, short enough to hide in a model load
REUSE_S = 5.0  # a reading serves every call this long: the embedder asks at each encode


def cpu_threads() -> int:
    """The cores this process may run on (llama-cpp-python's default is half of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def _cpu_ticks(cpus: set[int]) -> int | None:
    """Clock ticks the kernel counts as busy on ``cpus`` since boot (everything but idle and I/O wait)."""
    try:
        with open("/proc/stat") as stat:
            lines = [line.split() for line in stat if line.startswith("cpu")]
    except OSError:
        return None
    busy, seen = 0, False
    for name, *fields in lines:
        if name[3:].isdigit() and int(name[3:]) in cpus:
            ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
            busy += sum(ticks) - ticks[3] - ticks[4]
            seen = True
    return busy if seen else None


def busy_cores(window: float = SAMPLE_S) -> float | None:
    """Cores of this process's set that other work kept busy over ``window`` seconds (this process's own
    threads left out); None where the kernel does not say (no ``/proc/stat``)."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    before, own_before, start = _cpu_ticks(cpus), _own_seconds(), time.monotonic()
    if before is None:
        return None
    time.sleep(window)
    after, own_after, wall = _cpu_ticks(cpus), _own_seconds(), time.monotonic() - start
    if after is None or wall <= 0:
        return None
    others = (after - before) / hz - (own_after - own_before)
    return max(0.0, others / wall)


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system


_last: tuple[float, int] | None = None  # (when, free cores)
_lock = threading.Lock()
_refreshing = False


def free_cores() -> int:
    """The cores not kept busy by other work, at least one: this process's cores minus the busy ones (rounded
    half up: a passing spike hardly moves it). On two cores with one other busy process, one thread answered in
    533 ms p50 against 995 ms with two (idle: 559 and 331 ms; benchmarks/threads.py).

    The first call samples (a tenth of a second, when a model loads); later ones return the last reading at once,
    and one older than ``REUSE_S`` seconds is sampled again on a thread of its own: the embedder asks at every
    encode, and a question must not wait for the sample."""
    global _refreshing
    with _lock:
        last = _last
        stale = last is not None and time.monotonic() - last[0] >= REUSE_S and not _refreshing
        if stale:
            _refreshing = True
    if last is None:
        return _measure()
    if stale:
        threading.Thread(target=_measure, name="localpager-cores", daemon=True).start()
    return last[1]


def _measure() -> int:
    global _last, _refreshing
    busy = busy_cores()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except (AttributeError, OSError):  # Windows
            busy = 0.0
    free = max(1, cpu_threads() - int(busy + 0.5))
    with _lock:
        _last, _refreshing = (time.monotonic(), free), False
    return free
