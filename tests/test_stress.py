"""Stress: many writers, readers of every file and autosleep switching, all at
once on one mount; afterwards nothing is stuck, the server answers and the
statistics add up (SPEC.md, "Wakeup sources and counters").

test_stress: 8 writer processes each send 50,000 wake_lock / timed wake_lock /
wake_unlock writes over the names n0..n63, while two readers loop over every
file checking its format, a prober runs the wakeup_count handshake (a
blocking wakeup_count read cut short by a 20 ms interval timer, the count
written back, "mem" written to state), a toggler writes "mem"/"off" to
autosleep every 100 ms, and the test itself now and then SIGKILLs a reader
blocked in wakeup_count.  Each writer ends by unlocking every name; while
the writers run some lock is always active, so a 1.5 s tail follows in which
the system can go idle: autosleep really suspends and the prober gets counts
and runs the handshake against the toggler.  The mount runs with
--simulate-sleep-ms=5 --wakelock-limit=0.  About 30 s on 2 cores.

test_stress_gc: a shorter run (4 x 8,000 writes) with garbage collection on
every 101st unlock (--wakelock-gc-seconds=0) and a limit below the number of
names (--wakelock-limit=48), so that locks die and are recreated under load,
ENOSPC happens and the `deleted` row takes part in the bookkeeping.

The writers are plain Python processes: a FUSE write round trip costs
~20-25 us and Python adds a few; measured, 8 x 50,000 writes take ~15 s alone
and ~25 s with the readers running.  Environment knobs (for slow servers,
e.g. under valgrind): POWERFS_STRESS_OPS (writes per writer, default 50000),
POWERFS_STRESS_WRITERS (default 8).

The identity checked at the end, after autosleep is switched off, every name
is unlocked and the timeouts have passed: the registered count (wakeup_count)
is incremented once at every deactivation (SPEC.md; the kernel's
wakeup_source_deactivate() adds one to the registered half of
combined_event_count), and for every source active_count = relaxes + (1 if
active).  So the count equals the sum over all rows, `autosleep` and
`deleted` included, of active_count - active; with nothing active, of
active_count.  Relaxes per source are not shown, so this sum is the form the
per-source identity can be checked in.  Further: every successful wake_lock
write is one event (sum of event_count = the writers' successful locks),
every accepted autosleep write one activation and one event of `autosleep`,
and no number is negative or >= 2^31.
"""

import errno
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import (PYTHON, SOURCES_HEADER, STATS_COUNTERS, STATS_FILES,
                      Reader, timed, wait_until)

OPS = int(os.environ.get("POWERFS_STRESS_OPS", "50000"))
WRITERS = int(os.environ.get("POWERFS_STRESS_WRITERS", "8"))
NAMES = 64
LIMIT = 2 ** 31
STOP_GRACE = 10.0        # seconds for a stopped child to exit
TAIL = 1.5               # seconds of readers, toggler and prober alone


# --- the child processes --------------------------------------------------------

_WRITER = r'''
import errno, json, os, random, sys, time
mnt, idx, nops, names, gc, limited = (sys.argv[1], int(sys.argv[2]),
    int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1", sys.argv[6] == "1")
rnd = random.Random(7919 * (idx + 1))
lk = os.open(mnt + "/wake_lock", os.O_RDWR)
ul = os.open(mnt + "/wake_unlock", os.O_RDWR)
names = [b"n%d" % i for i in range(names)]
res = {"lock": 0, "timed": 0, "unlock": 0, "unlock_einval": 0,
       "lock_enospc": 0, "errors": []}
mine = set()          # names this writer has locked (they exist without GC)
def error(msg):
    if len(res["errors"]) < 20:
        res["errors"].append(msg)
t0 = time.monotonic()
for i in range(nops):
    x = rnd.random()
    name = names[rnd.randrange(len(names))]
    v = rnd.randrange(4)
    if x < 0.35:
        kind, fd, cmd = "lock", lk, name + (b"\n" if v & 1 else b"")
    elif x < 0.65:
        ns = rnd.randint(1000000, 50000000)         # 1-50 ms
        fmt = (b" %d", b"\t%d\n", b"  +%d", b" %d\n")[v]
        kind, fd, cmd = "timed", lk, name + fmt % ns
    else:
        kind, fd, cmd = "unlock", ul, name + (b"\n" if v & 1 else b"")
    try:
        n = os.write(fd, cmd)
    except OSError as e:
        if kind == "unlock" and e.errno == errno.EINVAL:
            if name in mine and not gc:
                error(f"write {i}: unlock {cmd!r}: EINVAL although this "
                      "writer created the lock and nothing collects it")
            res["unlock_einval"] += 1
        elif kind != "unlock" and e.errno == errno.ENOSPC and limited:
            res["lock_enospc"] += 1
        else:
            error(f"write {i}: {kind} {cmd!r}: {e}")
        continue
    if n != len(cmd):
        error(f"write {i}: {kind} {cmd!r} returned {n}")
        continue
    res[kind] += 1
    if kind != "unlock":
        mine.add(name)
# Release everything this writer may hold, so that the system can go idle
# once all writers are done.
for name in names:
    try:
        os.write(ul, name)
        res["unlock"] += 1
    except OSError as e:
        if e.errno != errno.EINVAL:
            error(f"final unlock {name!r}: {e}")
        res["unlock_einval"] += 1
res["secs"] = time.monotonic() - t0
print(json.dumps(res), flush=True)
'''

_READER = r'''
import json, os, re, sys, time
mnt, stop, idx, names, gc, limit = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
    int(sys.argv[4]), sys.argv[5] == "1", int(sys.argv[6]))
HEADER = bytes.fromhex(sys.argv[7])
COUNTERS = sys.argv[8].split(",")
STATS = sys.argv[9].split(",")
user_names = {b"n%d" % i for i in range(names)}
res = {"iterations": 0, "errors": [], "max_rows": 0}
U31 = 2 ** 31
def error(msg):
    if len(res["errors"]) < 20:
        res["errors"].append(msg)
ROW = re.compile(rb"(\S+)( *)\t" + rb"\t\t".join([rb"(-?\d+)"] * 9) + rb"\n")
def parse_sources(data, now_ms, whole=True):
    """The rows of one read of wakeup_sources; whole: it holds the listing
    to its end (the deleted row), not only its first page."""
    if not data.startswith(HEADER):
        error(f"wakeup_sources header {data[:120]!r}")
        return None
    rows, seen = [], set()
    pos = len(HEADER)
    while pos < len(data):
        m = ROW.match(data, pos)
        if not m:
            error(f"wakeup_sources row {data[pos:pos + 200]!r}")
            return None
        pos = m.end()
        name, pad = m.group(1), m.group(2)
        if len(name) + len(pad) != max(12, len(name)):
            error(f"wakeup_sources padding of {name!r}: {len(pad)}")
        v = [int(x) for x in m.groups()[2:]]
        if any(x < 0 or x >= U31 for x in v):
            error(f"wakeup_sources {name!r}: negative or wrapped: {v}")
        ac, ec, wc, xc, since, total, mx, last, prevent = v
        if ec < ac:
            error(f"{name!r}: event_count {ec} < active_count {ac}")
        if wc > ec:
            error(f"{name!r}: wakeup_count {wc} > event_count {ec}")
        if xc > ac:
            error(f"{name!r}: expire_count {xc} > active_count {ac}")
        if total < mx or mx < since or total < prevent:
            error(f"{name!r}: times total {total} max {mx} "
                  f"active_since {since} prevent {prevent}")
        if last > now_ms + 1:
            error(f"{name!r}: last_change {last} is in the future ({now_ms})")
        if name in seen:
            error(f"wakeup_sources: {name!r} twice")
        seen.add(name)
        rows.append((name, v))
    if whole and (not rows or rows[-1][0] != b"deleted"):
        error(f"wakeup_sources: last row is not 'deleted': {rows[-1:]}")
    bad = [n for n, _ in rows[:-1] if n not in user_names and n != b"autosleep"]
    if bad or (whole and b"autosleep" not in seen):
        error(f"wakeup_sources: unexpected rows {bad[:5]} / no autosleep")
    users = len(rows) - 2
    if limit and users > limit:
        error(f"wakeup_sources: {users} user sources, limit {limit}")
    res["max_rows"] = max(res["max_rows"], len(rows))
    return rows
def check_listing(name, data):
    if not re.fullmatch(rb"([^ \n]+( [^ \n]+)*)?\n", data):
        error(f"{name} format {data[:200]!r}")
        return
    lst = data.split()
    if lst != sorted(lst) or len(set(lst)) != len(lst):
        error(f"{name} not sorted/unique {data[:200]!r}")
    if set(lst) - user_names:
        error(f"{name} unknown names {sorted(set(lst) - user_names)[:5]}")
prev_stats, prev_rows = {}, {}
def check(name, data, now_ms, whole=True):
    if name in ("wake_lock", "wake_unlock"):
        check_listing(name, data)
    elif name == "autosleep":
        if data not in (b"off\n", b"mem\n"):
            error(f"autosleep {data!r}")
    elif name == "state":
        if data != b"freeze mem disk\n":
            error(f"state {data!r}")
    elif name == "wakeup_sources":
        rows = parse_sources(data, now_ms, whole)
        for n, v in rows or ():
            # Counters and times only grow (a collected lock starts again).
            old = prev_rows.get(n)
            if old and (not gc or n in (b"deleted", b"autosleep")):
                cols = (0, 1, 2, 3, 5, 6, 8) if n != b"deleted" else range(9)
                if any(v[c] < old[c] for c in cols):
                    error(f"{n!r} went backwards: {old} -> {v}")
            prev_rows[n] = v
    else:
        st = name.split("/", 1)[1]
        if st == "last_failed_dev":
            ok = data == b"\n"
        elif st == "last_failed_step":
            ok = data in (b"\n", b"freeze\n", b"suspend\n")
        elif st == "last_failed_errno":
            ok = data in (b"0\n", b"-16\n")
        else:
            ok = re.fullmatch(rb"\d+\n", data) is not None
            if ok:
                v = int(data)
                if v >= U31 or v < prev_stats.get(st, 0):
                    error(f"{name}: {prev_stats.get(st)} -> {v}")
                prev_stats[st] = v
        if not ok:
            error(f"{name} {data!r}")
ROOT = ["wake_lock", "wake_unlock", "wakeup_sources", "autosleep", "state"]
STATS = ["suspend_stats/" + s for s in STATS]
def read_file(name):
    fd = os.open(os.path.join(mnt, name), os.O_RDONLY)
    try:
        for attempt in range(2):          # fresh, then after lseek(fd, 0)
            if attempt:
                os.lseek(fd, 0, os.SEEK_SET)
            whole = True
            if name == "wakeup_sources":
                # Printed a row at a time, like the kernel's seq_file: one
                # read returns about a page of whole rows, consistent in
                # itself; a later read goes on from the next row as the
                # listing is then.  64 sources with counts in the
                # thousands and 7-digit times outgrow a page: then the
                # first page is checked, and the rest must end with the
                # deleted row.
                data = os.read(fd, 1 << 20)
                rest = b""
                while True:
                    more = os.read(fd, 1 << 20)
                    if not more:
                        break
                    rest += more
                if rest:
                    whole = False
                    if len(data) < 2048:
                        error(f"{name}: a first read of {len(data)} bytes, "
                              f"then {len(rest)} more")
                    if not re.search(rb"(^|\n)deleted +\t[^\n]*\n$", rest):
                        error(f"{name}: the rest does not end with the "
                              f"deleted row: {rest[-120:]!r}")
            else:
                data = os.read(fd, 8192)
                more = os.read(fd, 8192)  # the snapshot is used up: 0 at once
                if more:
                    error(f"{name}: second read returned {more!r}")
            check(name, data, time.monotonic() * 1000, whole)
    finally:
        os.close(fd)
rnd = idx
while not os.path.exists(stop):
    # Each round: the root files and three of suspend_stats/ (all of them
    # every five rounds), starting at a different file each round so that
    # the readers do not march in step.
    rnd += 1
    files = ROOT + [STATS[(3 * rnd + k) % len(STATS)] for k in range(3)]
    r = rnd % len(files)
    for name in files[r:] + files[:r]:
        try:
            read_file(name)
        except OSError as e:
            error(f"{name}: {e}")
    res["iterations"] += 1
    time.sleep(0.01)
print(json.dumps(res), flush=True)
'''

_TOGGLER = r'''
import json, os, sys, time
mnt, stop = sys.argv[1], sys.argv[2]
path = os.path.join(mnt, "autosleep")
res = {"accepted": 0, "errors": [], "max_secs": 0.0}
keep = os.open(path, os.O_WRONLY)
i = 0
while not os.path.exists(stop):
    cmd = (b"mem", b"off\n", b"mem\n", b"off")[i % 4]
    t0 = time.monotonic()
    try:
        if i % 2:
            n = os.write(keep, cmd)            # one fd, again and again
        else:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC)   # like a shell
            try:
                n = os.write(fd, cmd)
            finally:
                os.close(fd)
        if n == len(cmd):
            res["accepted"] += 1
        else:
            res["errors"].append(f"{cmd!r} returned {n}")
    except OSError as e:
        res["errors"].append(f"{cmd!r}: {e}")      # never EBUSY (SPEC)
    res["max_secs"] = max(res["max_secs"], time.monotonic() - t0)
    i += 1
    time.sleep(0.1)
os.close(keep)
res["errors"] = res["errors"][:20]
print(json.dumps(res), flush=True)
'''

# A wakeup_count user: read the count (a blocking read cut short by an
# interval timer: the signal must end it with EINTR), write it back, write
# "mem" to state.  EBUSY (autosleep on, or an event came in) and EINVAL (a
# stale count) are the normal refusals.
_PROBER = r'''
import ctypes, errno, json, os, re, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.read.restype = ctypes.c_ssize_t
mnt, stop = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGALRM, lambda s, f: None)
signal.siginterrupt(signal.SIGALRM, True)
buf = ctypes.create_string_buffer(8192)
res = {"reads": 0, "eintr": 0, "armed": 0, "count_busy": 0, "count_stale": 0,
       "suspended": 0, "state_busy": 0, "last": -1, "errors": []}
def error(msg):
    if len(res["errors"]) < 20:
        res["errors"].append(msg)
wc = os.open(os.path.join(mnt, "wakeup_count"), os.O_WRONLY)
st = os.open(os.path.join(mnt, "state"), os.O_WRONLY)
while not os.path.exists(stop):
    fd = os.open(os.path.join(mnt, "wakeup_count"), os.O_RDONLY)
    signal.setitimer(signal.ITIMER_REAL, 0.02, 0.02)
    n = libc.read(fd, buf, 8192)
    e = ctypes.get_errno()
    signal.setitimer(signal.ITIMER_REAL, 0)
    os.close(fd)
    if n < 0:
        if e == errno.EINTR:
            res["eintr"] += 1
        else:
            error(f"read: {os.strerror(e)}")
        continue
    data = buf.raw[:n]
    if not re.fullmatch(rb"\d+\n", data):
        error(f"wakeup_count {data!r}")
        continue
    v = int(data)
    if v < res["last"] or v >= 2 ** 31:
        error(f"wakeup_count went from {res['last']} to {v}")
    res["last"] = v
    res["reads"] += 1
    try:
        os.write(wc, data)
    except OSError as e:
        if e.errno == errno.EBUSY:
            res["count_busy"] += 1
            time.sleep(0.001)
        elif e.errno == errno.EINVAL:
            res["count_stale"] += 1
        else:
            error(f"wakeup_count write: {e}")
        continue
    res["armed"] += 1
    try:
        os.write(st, b"mem")
        res["suspended"] += 1
    except OSError as e:
        if e.errno == errno.EBUSY:
            res["state_busy"] += 1
        else:
            error(f"state write: {e}")
print(json.dumps(res), flush=True)
'''


# --- helpers -----------------------------------------------------------------------

def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, D, Z...), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def proc_wchan(pid):
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return f.read().strip()
    except OSError:
        return "?"


class Child:
    """A helper process whose stdout (one JSON line) and stderr go to
    files, so it can never block on a full pipe."""

    def __init__(self, workdir, label, script, *args):
        self.label = label
        self.out = os.path.join(workdir, label + ".out")
        self.err = os.path.join(workdir, label + ".err")
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [PYTHON, "-c", script, *[str(a) for a in args]],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def finish(self, deadline, stuck):
        """Wait until deadline for the child to exit; if it has not, note
        its state (D = stuck inside the file system) in stuck and kill it.
        Returns its JSON report or None."""
        try:
            self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pid = self.proc.pid
            stuck.append(f"{self.label} (pid {pid}) still running, state "
                         f"{proc_state(pid)}, wchan {proc_wchan(pid)}")
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                stuck.append(f"{self.label} survived SIGKILL for 5 s, state "
                             f"{proc_state(pid)}")
            return None
        with open(self.out, "rb") as f:
            lines = f.read().splitlines()
        if self.proc.returncode != 0 or not lines:
            with open(self.err, "rb") as f:
                err = f.read().decode(errors="replace")[-2000:]
            stuck.append(f"{self.label} exited with {self.proc.returncode}"
                         f":\n{err}")
            return None
        return json.loads(lines[-1])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


ROW_RE = re.compile(rb"(\S+)( *)\t" + rb"\t\t".join([rb"(-?\d+)"] * 9)
                    + rb"\n")


def strict_sources(data):
    """wakeup_sources in its exact format: list of (name, [9 numbers])."""
    assert data.startswith(SOURCES_HEADER), data[:200]
    rows, pos = [], len(SOURCES_HEADER)
    while pos < len(data):
        m = ROW_RE.match(data, pos)
        assert m, f"bad wakeup_sources row {data[pos:pos + 200]!r}"
        pos = m.end()
        name, pad = m.group(1), m.group(2)
        assert len(name) + len(pad) == max(12, len(name)), m.group(0)
        rows.append((name, [int(x) for x in m.groups()[2:]]))
    return rows


def kill_blocked_count_reader(p):
    """A reader blocked in wakeup_count (or not, if nothing is active right
    now) killed with SIGKILL: it must be gone at once (Reader.kill fails
    if it survives 5 s)."""
    with Reader(p.path("wakeup_count")) as r:
        r.wait_in_read(timeout=10)      # and taken by powerfs
    return True


# --- the run ---------------------------------------------------------------------------

def run_stress(p, writers, ops, names, gc=False, limit=0,
               writer_deadline=240.0):
    t_mount = time.monotonic()
    work = tempfile.mkdtemp(prefix="powerfs-stress-")
    stop = os.path.join(work, "stop")
    children = []
    stuck, problems = [], []
    try:
        hexhdr = SOURCES_HEADER.hex()
        readers = [Child(work, f"reader{i}", _READER, p.mnt, stop, i, names,
                         int(gc), limit, hexhdr, ",".join(STATS_COUNTERS),
                         ",".join(STATS_FILES))
                   for i in range(2)]
        toggler = Child(work, "toggler", _TOGGLER, p.mnt, stop)
        prober = Child(work, "prober", _PROBER, p.mnt, stop)
        wrs = [Child(work, f"writer{i}", _WRITER, p.mnt, i, ops, names,
                     int(gc), int(limit > 0))
               for i in range(writers)]
        children = readers + [toggler, prober] + wrs

        # While the writers run: now and then SIGKILL a reader blocked in
        # wakeup_count, and watch the server.
        t0 = time.monotonic()
        deadline = t0 + writer_deadline
        killed_readers = 0
        next_kill = t0 + 1.0
        while any(w.proc.poll() is None for w in wrs):
            if time.monotonic() > deadline or not p.alive():
                break
            if time.monotonic() >= next_kill:
                kill_blocked_count_reader(p)
                killed_readers += 1
                next_kill = time.monotonic() + 2.0
            time.sleep(0.05)
        writer_secs = time.monotonic() - t0

        wres = [w.finish(deadline, stuck) for w in wrs]
        # A tail with the locks gone: autosleep really suspends, the prober
        # gets counts and runs the handshake, while the toggler goes on.
        tail = time.monotonic() + TAIL
        while time.monotonic() < tail and p.alive():
            time.sleep(0.05)
        with open(stop, "w"):
            pass
        grace = time.monotonic() + STOP_GRACE
        rres = [r.finish(grace, stuck) for r in readers]
        tres = toggler.finish(grace, stuck)
        pres = prober.finish(grace, stuck)
        assert p.alive(), f"powerfs died under stress:\n{p.log()[-3000:]}"
        assert not stuck, "children stuck or failed:\n" + "\n".join(stuck)

        for label, res in ([(f"writer{i}", r) for i, r in enumerate(wres)]
                           + [(f"reader{i}", r) for i, r in enumerate(rres)]
                           + [("toggler", tres), ("prober", pres)]):
            if res["errors"]:
                problems.append(f"{label}: " + "\n  ".join(res["errors"]))
        assert not problems, "\n".join(problems)
        assert all(r["iterations"] > 0 for r in rres), rres
        assert tres["accepted"] > 0 and pres["reads"] + pres["eintr"] > 0

        # Quiesce: autosleep off, every lock released, timeouts over.
        assert timed(p.write, "autosleep", b"off") == 3
        for i in range(names):
            try:
                timed(p.write, "wake_unlock", b"n%d" % i)
            except OSError as e:
                assert e.errno == errno.EINVAL, e   # never created, or collected
        # The last timeouts run out.
        assert wait_until(lambda: timed(p.read, "wake_lock") == b"\n")
        count_data = timed(p.read, "wakeup_count")
        assert re.fullmatch(rb"\d+\n", count_data), count_data
        count = int(count_data)
        rows = strict_sources(timed(p.read_all, "wakeup_sources"))
        now_ms = time.monotonic() * 1000
        by_name = dict(rows)
        assert len(by_name) == len(rows), "duplicate rows"
        assert rows[-1][0] == b"deleted"
        asl = by_name[b"autosleep"]
        user = {n: v for n, v in by_name.items()
                if n not in (b"autosleep", b"deleted")}
        assert set(user) <= {b"n%d" % i for i in range(names)}
        assert timed(p.read, "wake_unlock").split() == sorted(user)

        summary = (f"{writers} writers x {ops} writes in {writer_secs:.1f} s; "
                   f"readers {[r['iterations'] for r in rres]} rounds; "
                   f"toggler {tres['accepted']} writes; prober {pres}; "
                   f"{killed_readers} blocked readers killed; count {count}")
        print(summary)

        # No negative or wrapped numbers; per-row invariants; nothing active.
        assert 0 <= count < LIMIT
        for n, v in rows:
            ac, ec, wc, xc, since, total, mx, last, prevent = v
            assert all(0 <= x < LIMIT for x in v), (n, v)
            assert since == 0, (n, v)
            assert ec >= ac and wc <= ec and xc <= ac, (n, v)
            assert total >= mx and total >= prevent, (n, v)
            assert last <= now_ms + 1, (n, v, now_ms)
            if n != b"deleted":         # (that row is a sum)
                assert total <= now_ms - t_mount * 1000 + 1000, (n, v)

        # The registered count: one per deactivation = sum of active_count
        # (each activation ended in exactly one deactivation).
        assert count == sum(v[0] for v in by_name.values()), \
            (count, sum(v[0] for v in by_name.values()), summary)
        # Every successful wake_lock write is one event of its source (the
        # collected ones live on in `deleted`).
        locks = sum(r["lock"] + r["timed"] for r in wres)
        assert sum(v[1] for v in user.values()) + by_name[b"deleted"][1] \
            == locks
        # Each accepted autosleep write (the toggler's and our final "off")
        # is one activation and one event of `autosleep`.
        assert asl[0] == asl[1] == tres["accepted"] + 1, (asl, tres)
        # The deleted row only holds collected locks.
        if not gc:
            assert by_name[b"deleted"][:2] == [0, 0]
            assert len(user) == names
        else:
            assert by_name[b"deleted"][0] > 0, by_name[b"deleted"]
            assert sum(r["unlock_einval"] for r in wres) > 0
        if limit:
            assert len(user) <= limit
            assert sum(r["lock_enospc"] for r in wres) > 0, wres
        # The prober never saw a count beyond the final one.
        assert pres["last"] <= count

        # suspend_stats: failures add up; the prober's successful suspends
        # are among the successes.
        stats = {s: int(timed(p.read, "suspend_stats/" + s))
                 for s in STATS_COUNTERS}
        assert all(0 <= v < LIMIT for v in stats.values()), stats
        assert stats["fail"] == sum(v for s, v in stats.items()
                                    if s.startswith("failed_")), stats
        assert stats["success"] >= pres["suspended"], (stats, pres)
        assert stats["success"] > 0, stats       # (in the tail at least)
        assert pres["reads"] > 0, pres
        assert timed(p.read, "suspend_stats/last_failed_errno") in \
            (b"0\n", b"-16\n")

        # The server still answers, and the count still moves by one per
        # deactivation.
        assert timed(p.read, "state") == b"freeze mem disk\n"
        # (With a limit, only an existing name is sure to be accepted.)
        probe = min(user) if limit and len(user) >= limit else b"after"
        timed(p.write, "wake_lock", probe)
        timed(p.write, "wake_unlock", probe)
        assert timed(p.read, "wakeup_count") == b"%d\n" % (count + 1)
        assert timed(p.read, "autosleep") == b"off\n"
    finally:
        with open(stop, "w"):
            pass
        for c in children:
            c.kill()
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.timeout(300)
def test_stress(mount):
    p = mount("--simulate-sleep-ms=5", "--wakelock-limit=0")
    run_stress(p, writers=WRITERS, ops=OPS, names=NAMES)


@pytest.mark.timeout(120)
def test_stress_gc(mount):
    p = mount("--simulate-sleep-ms=5", "--wakelock-limit=48",
              "--wakelock-gc-seconds=0")
    run_stress(p, writers=max(1, WRITERS // 2), ops=max(1, OPS * 4 // 25),
               names=NAMES, gc=True, limit=48, writer_deadline=100.0)
