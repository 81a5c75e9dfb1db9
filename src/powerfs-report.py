#!/usr/bin/python3
"""powerfs-report - what kept the system awake, from powerfs event journals.

Reads one or more powerfs event journals (JSON Lines) and writes one of:

  --html=FILE   a self-contained HTML page: an SVG timeline with a row per
                wakeup source (bars for its active intervals), suspended
                periods shaded, failed suspends marked with the sources that
                blocked them, autosleep on/off, and tables of the top sources
  --trace=FILE  a trace in the Chrome JSON Trace Event Format, for Perfetto
                (ui.perfetto.dev, "Open trace file") or chrome://tracing
  --text        a summary on standard output

FILE may be "-" for standard output.  Journals may be given in any order
(after rotation, e.g. PATH.1 PATH): they are read oldest first, by the time
of their first event.  The report never talks to a running powerfs.

Options:
  --since=DURATION  only the last DURATION before the newest event, e.g. 90s,
                    10m, 2h, 1d, 1h30m
  --top=N           rows in the top-sources tables (default 10)
  --rows=N          most source rows drawn in the HTML timeline (default 100);
                    the others are counted on an "N more sources" line
  --help            this text

Names: a source name (or a container's cgroup) is shown as its bytes would
look, safely: a backslash as \\\\, and every byte of what a terminal or a page
could take for something other than text (control characters, escape
sequences, bidirectional and other invisible format characters, bytes that
are not UTF-8) as \\xNN.

Times: the timeline's axis is wall-clock time (local time zone); durations
come from CLOCK_MONOTONIC within one boot, so the time the host spent
suspended never counts as active time.  "Prevent-suspend time" is the time a
source was active while autosleep was on.

Exit status: 0 done, 1 the output could not be written, 2 bad usage or a
missing or malformed journal (the message names FILE:LINE).
"""

import bisect
import errno as errno_mod
import html
import itertools
import json
import os
import re
import sys
import time

PROG = "powerfs-report"

# A drawn timeline stays under about 20,000 SVG elements whatever the input:
# bars closer than a pixel are merged, and while one layer still has more
# shapes than its budget the merge distance doubles.
BAR_BUDGET = 12000
SHADE_BUDGET = 2000
FAIL_BUDGET = 1200
AUTOSLEEP_BUDGET = 600
PLOT_W = 1080            # px of the time axis
LABEL_W = 210            # px of the row labels
ROW_H = 16
MIN_BAR_W = 1.0          # px: an instant-long activation stays visible

CHUNK_BYTES = 1 << 14    # journal bytes parsed per json.loads call
OPEN_START = 1           # interval flags: began before the data
OPEN_END = 2             # still active at the end of the data
MERGED = 4


class InputError(Exception):
    """A journal that cannot be read: reported as FILE[:LINE]: message."""

    def __init__(self, path, line, msg):
        super().__init__(msg)
        self.path, self.line, self.msg = path, line, msg

    def __str__(self):
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.msg}"


class UsageError(Exception):
    pass


class BadEvent(Exception):
    pass


# ---------------------------------------------------------------------------
# Names as they may be shown

def _escape_char(ch):
    if ch == "\\":
        return "\\\\"
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:       # a byte that is not UTF-8 (surrogateescape)
        return f"\\x{o - 0xDC00:02x}"
    if ch.isprintable():
        return ch
    return "".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))


def safe_name(text):
    """A name from a journal as it may reach a terminal or a page: printable
    characters as they are, a backslash doubled, and each byte of anything
    else as \\xNN: C0 and C1 controls (an ESC sequence included), and what
    str.isprintable() refuses, the Unicode categories Other and Separator
    (bidirectional controls such as U+202E and U+2066, zero-width and other
    format characters, line and paragraph separators, unassigned code
    points), but the space."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(map(_escape_char, text))


def safe_bytes(data):
    """safe_name() of a name's bytes: those that are not UTF-8 as \\xNN too."""
    return safe_name(data.decode("utf-8", "surrogateescape"))


# ---------------------------------------------------------------------------
# Reading journals

def parse_line(ln):
    obj = json.loads(ln)
    if type(obj) is not dict:
        raise ValueError("not an object")
    return obj


def is_start(ln):
    try:
        return parse_line(ln).get("ev") == "start"
    except ValueError:
        return False


class Journal:
    """One journal file, read in chunks of lines.

    chunks() yields (events, line_of): the parsed objects of a run of lines
    and a function from an event's index in it to its line number.  A chunk
    is parsed with one json.loads call over its lines joined into an array
    (the C scanner does the work); a chunk that fails, or whose lines did not
    give one object each, is parsed again line by line to name the culprit.

    Two kinds of malformed line are skipped with a warning rather than
    refused: a last line without its newline (powerfs died mid-write, or is
    writing now), and a line followed by a "start" event (the torn last
    write before a crash, which the restarted powerfs followed with a
    newline).  Anything else malformed is an error at FILE:LINE."""

    def __init__(self, path):
        self.path = path
        self.warnings = []
        try:
            self.f = open(path, "rb")
        except OSError as e:
            raise InputError(path, None, e.strerror or str(e)) from None
        self.first_wall = None
        # The first event's wall time orders the files (rotation).
        lineno = 0
        for ln in self.f:
            lineno += 1
            if not ln.strip():
                continue
            try:
                w = parse_line(ln).get("wall")
            except ValueError:
                break               # reported by chunks()
            if type(w) is int:
                self.first_wall = w
            break
        self.f.seek(0)

    def close(self):
        self.f.close()

    def read_lines(self, hint):
        try:
            return self.f.readlines(hint)
        except OSError as e:
            raise InputError(self.path, None, e.strerror or str(e)) from None

    def chunks(self):
        loads = json.loads
        lineno = 1                  # number of the chunk's first line
        while True:
            lines = self.read_lines(CHUNK_BYTES)
            if not lines:
                return
            objs = None
            try:
                objs = loads(b"[" + b",".join(lines) + b"]")
                if len(objs) != len(lines):
                    objs = None
            except ValueError:      # UnicodeDecodeError too
                objs = None
            if objs is not None:
                yield objs, (lambda i, first=lineno: first + i)
                lineno += len(lines)
                continue
            objs, numbers = [], []
            j = 0
            while j < len(lines):
                ln = lines[j]
                n = lineno + j
                j += 1
                if not ln.strip():
                    continue
                try:
                    obj = parse_line(ln)
                except ValueError as e:
                    if j == len(lines):
                        more = self.read_lines(1)
                        lines.extend(more)
                    if j == len(lines) and not ln.endswith(b"\n"):
                        self.warnings.append(f"{self.path}:{n}: ignoring an "
                                             "incomplete last line")
                        continue
                    if j < len(lines) and is_start(lines[j]):
                        self.warnings.append(f"{self.path}:{n}: ignoring a "
                                             "malformed line before a start "
                                             "event (torn by a crash)")
                        continue
                    if isinstance(e, UnicodeDecodeError):
                        msg = "not valid UTF-8"
                    elif str(e) == "not an object":
                        msg = "not a JSON object"
                    else:
                        msg = f"not a JSON object ({str(e).split(':')[0]})"
                    raise InputError(self.path, n, msg) from None
                objs.append(obj)
                numbers.append(n)
            yield objs, numbers.__getitem__
            lineno += len(lines)


# ---------------------------------------------------------------------------
# The model: what was active when

class Source:
    __slots__ = ("key", "name", "hex", "since_t", "since_w", "since_flags",
                 "deadline", "intervals", "locks", "owners", "expires", "gcs",
                 "active_us", "prevent_us", "count", "longest", "tid",
                 "_label")

    def __init__(self, key, name, hexname):
        self.key, self.name, self.hex = key, name, hexname
        self.since_t = None
        self.since_w = None
        self.since_flags = 0
        self.deadline = None
        self.intervals = []      # (w0, w1, t0, t1, run, flags)
        self.locks = 0
        self.owners = {}         # (cgroup, pidns, uid) -> activations
        self.expires = 0
        self.gcs = 0
        self._label = None

    def label(self):
        """The name as it may be shown: safe_name(), of its bytes when the
        journal gave them (a name that is not UTF-8)."""
        if self._label is None:
            data = None
            if self.hex:
                try:
                    data = bytes.fromhex(self.hex)
                except ValueError:
                    pass
            self._label = safe_bytes(data) if data is not None \
                else safe_name(self.name)
        return self._label


def container_of(cgroup, pidns):
    """A caller's container: its cgroup, else its pid namespace; "host" for
    the root cgroup or neither."""
    if cgroup is not None:
        return "host" if cgroup in ("", "/") else str(cgroup)
    if pidns is not None:
        return f"pidns:{pidns}"
    return "host"


class Model:
    """Replays the events of all journals, oldest first.  want_counter
    records the number of active sources at every change (for the trace)."""

    def __init__(self, want_counter=True):
        self.sources = {}
        self.runs = []           # [boot_id, t0, w0, t1, w1, ended_by]
        self.autosleep = []      # (w0, w1, t0, t1, run, flags, state)
        self.suspends = []       # dicts: every attempt (state or autosleep)
        self.sleeps = []         # (w0, w1, t0, t1, kind): the host slept
        self.backoffs = []       # (w, result, pause_ms)
        self.count_write_fail = 0
        self.reads = []          # (w, n, uid or None): wakeup_count reads
        self.active_counter = []  # (w, number of active sources)
        self.want_counter = want_counter
        self.events = 0
        self.first_w = None
        self.last_t = None
        self.last_w = None
        self.run = -1
        self.as_since = None     # (t, w, state, flags) while autosleep is on
        self.fast = False        # feed() may take its inline path
        self.n_active = 0
        self.warnings = []

    # -- runs ----------------------------------------------------------------

    def begin_run(self, boot, t, w):
        self.runs.append([boot, t, w, t, w, None])
        self.run = len(self.runs) - 1

    def end_run(self, t, w, how, open_end=False):
        """Everything stops with powerfs: every source and autosleep."""
        flags = OPEN_END if open_end else 0
        for s in self.sources.values():
            if s.since_t is not None:
                end_t, end_w = t, w
                if s.deadline is not None and s.deadline < t:
                    # Its timeout would have ended it: the journal lost the
                    # expire event (powerfs died), so end it there.
                    end_w = w - (t - s.deadline)
                    end_t = s.deadline
                    f = s.since_flags
                else:
                    f = s.since_flags | flags
                self.deactivate(s, end_t, end_w, f)
        if self.as_since is not None:
            t0, w0, state, f = self.as_since
            self.autosleep.append((w0, w, t0, t, self.run, f | flags, state))
            self.as_since = None
        if self.run >= 0:
            r = self.runs[self.run]
            r[3], r[4], r[5] = t, w, how

    def deactivate(self, s, t, w, flags):
        t0, w0 = s.since_t, s.since_w
        s.intervals.append((w0, max(w, w0), t0, max(t, t0), self.run, flags))
        s.since_t = s.since_w = None
        s.since_flags = 0
        s.deadline = None
        self.n_active -= 1
        if self.want_counter:
            self.active_counter.append((w, self.n_active))

    def activate(self, s, t, w, flags=0):
        s.since_t, s.since_w, s.since_flags = t, w, flags
        self.n_active += 1
        if self.want_counter:
            self.active_counter.append((w, self.n_active))

    def source(self, e):
        name = e["src"]
        if type(name) is not str:
            raise BadEvent('"src" is not a string')
        hexname = e.get("src_hex")
        key = name
        if hexname is not None:
            if type(hexname) is not str:
                raise BadEvent('"src_hex" is not a string')
            key = "\0" + hexname       # never equal to a printable name
        s = self.sources.get(key)
        if s is None:
            s = self.sources[key] = Source(key, name, hexname)
        return s

    # -- the replay ------------------------------------------------------------

    def feed(self, events, path, line_of):
        """Replays a chunk of events.  The frequent cases (lock, unlock,
        expire, count_read, count_write, in a run in progress) are handled
        inline here, on local variables; everything else by feed_one()."""
        i = 0
        sources = self.sources
        counter_append = self.active_counter.append
        want_counter = self.want_counter
        feed_one = self.feed_one
        n_active = self.n_active
        last_t = self.last_t
        last_w = self.last_w
        count = self.events
        run = self.run
        fast = self.fast
        try:
            for i, e in enumerate(events):
                t = e["t"]
                w = e["wall"]
                ev = e["ev"]
                s = None
                if fast and type(t) is int and type(w) is int and t >= last_t:
                    if ev == "lock":
                        name = e["src"]
                        hx = e.get("src_hex")
                        s = sources.get(name if hx is None else "\0" + str(hx))
                        if s is not None and type(name) is str and \
                                (s.since_t is not None or not e.get("was_active")):
                            if s.since_t is None:
                                s.since_t = t
                                s.since_w = w
                                n_active += 1
                                if want_counter:
                                    counter_append((w, n_active))
                                owner = (e.get("cgroup"), e.get("pidns"),
                                         e.get("uid"))
                                owners = s.owners
                                owners[owner] = owners.get(owner, 0) + 1
                            timeout = e.get("timeout_ms")
                            s.deadline = t + int(timeout) * 1000 if timeout else None
                            s.locks += 1
                            count += 1
                            last_t = t
                            last_w = w
                            continue
                    elif ev == "unlock" or ev == "expire":
                        name = e["src"]
                        hx = e.get("src_hex")
                        s = sources.get(name if hx is None else "\0" + str(hx))
                        if s is not None and s.since_t is not None and \
                                type(name) is str:
                            if ev == "expire":
                                s.expires += 1
                            t0 = s.since_t
                            w0 = s.since_w
                            s.intervals.append((w0, w if w > w0 else w0, t0,
                                                t if t > t0 else t0, run,
                                                s.since_flags))
                            s.since_t = s.since_w = s.deadline = None
                            s.since_flags = 0
                            n_active -= 1
                            if want_counter:
                                counter_append((w, n_active))
                            count += 1
                            last_t = t
                            last_w = w
                            continue
                    elif ev == "count_read":
                        self.reads.append((w, 1, e.get("uid")))
                        count += 1
                        last_t = t
                        last_w = w
                        continue
                    elif ev == "count_write":
                        if e.get("result"):
                            self.count_write_fail += 1
                        count += 1
                        last_t = t
                        last_w = w
                        continue
                # Everything else, on the model's own state.
                self.n_active = n_active
                self.last_t = last_t
                self.last_w = last_w
                self.events = count
                feed_one(e)
                n_active = self.n_active
                last_t = self.last_t
                last_w = self.last_w
                count = self.events
                run = self.run
                fast = self.fast
        except InputError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError,
                BadEvent) as exc:
            e = events[i]
            if not isinstance(e, dict):
                msg = "not a JSON object"
            elif isinstance(exc, KeyError):
                msg = f"event without the {exc.args[0]!r} field"
            elif isinstance(exc, BadEvent):
                msg = str(exc)
            else:
                msg = f"malformed {e.get('ev', 'event')!r} event"
            raise InputError(path, line_of(i), msg) from None
        finally:
            self.n_active = n_active
            self.last_t = last_t
            self.last_w = last_w
            self.events = count

    def feed_one(self, e):
        t = e["t"]
        w = e["wall"]
        ev = e["ev"]
        if type(t) is not int or type(w) is not int:
            raise BadEvent('"t" and "wall" must be integers')
        fresh = False
        if self.run < 0:
            self.first_w = w
            self.begin_run(e.get("boot_id") if ev == "start" else None, t, w)
            fresh = True
        elif self.runs[self.run][5] is not None:
            # The last run ended with a stop: anything but a start begins a
            # run we were not told about.
            if ev != "start":
                self.begin_run(self.runs[self.run][0] if t >= self.last_t
                               else None, t, w)
                fresh = True
        elif t < self.last_t and ev != "start":
            # The monotonic clock went back without a start event: a new boot
            # we were not told about.
            self.end_run(self.last_t, self.last_w, "reboot")
            self.begin_run(None, t, w)
            fresh = True
        self.events += 1
        if ev == "lock":
            s = self.source(e)
            if s.since_t is None:
                if e.get("was_active"):
                    # Active since before the data we have (rotated away).
                    r = self.runs[self.run]
                    self.activate(s, r[1], r[2], OPEN_START)
                else:
                    self.activate(s, t, w)
                owner = (e.get("cgroup"), e.get("pidns"), e.get("uid"))
                s.owners[owner] = s.owners.get(owner, 0) + 1
            timeout = e.get("timeout_ms") or 0
            s.deadline = t + int(timeout) * 1000 if timeout else None
            s.locks += 1
        elif ev == "unlock" or ev == "expire":
            s = self.source(e)
            if ev == "expire":
                s.expires += 1
            if s.since_t is not None:
                self.deactivate(s, t, w, s.since_flags)
            elif ev == "expire" or e.get("was_active"):
                r = self.runs[self.run]
                self.activate(s, r[1], r[2], OPEN_START)
                self.deactivate(s, t, w, OPEN_START)
        elif ev == "count_read":
            self.reads.append((w, 1, e.get("uid")))
        elif ev == "count_reads":
            self.count_reads(e, w)
        elif ev == "count_write":
            if e.get("result"):
                self.count_write_fail += 1
        elif ev == "suspend":
            self.suspend(e, t, w)
        elif ev == "sleep":
            t0 = e.get("start", t)
            w0 = e.get("start_wall", w)
            self.sleeps.append((w0, e.get("end_wall", w), t0, e.get("end", t),
                                "sleep"))
        elif ev == "gc":
            s = self.source(e)
            s.gcs += 1
            if s.since_t is not None:
                self.deactivate(s, t, w, s.since_flags)
        elif ev == "autosleep":
            state = e["state"]
            if type(state) is not str:
                raise BadEvent('"state" is not a string')
            if self.as_since is not None and self.as_since[2] != state:
                t0, w0, st, f = self.as_since
                self.autosleep.append((w0, w, t0, t, self.run, f, st))
                self.as_since = None
            if state != "off" and self.as_since is None:
                self.as_since = (t, w, state, 0)
        elif ev == "start":
            if not fresh:
                if self.runs[self.run][5] is None:
                    self.end_run(self.last_t, self.last_w, "crash")
                self.begin_run(e.get("boot_id"), t, w)
        elif ev == "stop":
            self.end_run(t, w, "stop")
        elif ev == "backoff":
            self.backoffs.append((w, e.get("result", 0), e.get("pause_ms", 0)))
        # Anything else: a newer powerfs's event, ignored.
        self.last_t = t
        self.last_w = w
        # The inline path of feed() needs a run in progress.
        self.fast = self.runs[self.run][5] is None

    def count_reads(self, e, w):
        """Reads powerfs coalesced: n in all, by uid, and by other uids."""
        n, uids, other = e["n"], e.get("uids", {}), e.get("other_uids", 0)
        if type(n) is not int or not isinstance(uids, dict) or \
                type(other) is not int or \
                not all(type(k) is str and k.isdigit() and type(v) is int
                        for k, v in uids.items()):
            raise BadEvent('"n", "uids" or "other_uids" malformed')
        for k, v in uids.items():
            self.reads.append((w, v, int(k)))
        rest = n - sum(uids.values())
        if rest > 0:
            self.reads.append((w, rest, None))

    def suspend(self, e, t, w):
        result = e.get("result", 0)
        if type(result) is not int:
            raise BadEvent('"result" is not an integer')
        rec = {
            "w0": e.get("start_wall", w), "w1": e.get("end_wall", w),
            "t0": e.get("start", t), "t1": e.get("end", t),
            "result": result, "step": e.get("step") or "",
            "by": e.get("by") or "", "state": e.get("state") or "",
            "active": names_of(e.get("active")),
            "signalled": names_of(e.get("signalled")),
            "pid": e.get("pid"), "uid": e.get("uid"),
        }
        for k in ("w0", "w1", "t0", "t1"):
            if type(rec[k]) is not int:
                raise BadEvent('suspend "start", "end", "start_wall" and '
                               '"end_wall" must be integers')
        self.suspends.append(rec)
        if result == 0:
            self.sleeps.append((rec["w0"], rec["w1"], rec["t0"], rec["t1"],
                                "suspend"))

    def finish(self):
        if self.run >= 0 and self.runs[self.run][5] is None:
            self.end_run(self.last_t, self.last_w, None, open_end=True)


def names_of(lst):
    """(names, more): a journal list of source names, which may end with a
    string "+N more"."""
    if not isinstance(lst, list):
        return [], 0
    names, more = [], 0
    for x in lst:
        if type(x) is not str:
            continue
        m = MORE_RE.fullmatch(x)
        if m:
            more += int(m.group(1))
        else:
            names.append(x)
    return names, more


MORE_RE = re.compile(r"\+(\d+) more")


# ---------------------------------------------------------------------------
# The window and the figures

class Report:
    def __init__(self, model, since_us=None):
        self.m = model
        self.end_w = model.last_w
        start = model.first_w
        if since_us is not None:
            start = max(start, self.end_w - since_us)
        self.start_w = start
        self.since_us = since_us
        self.clip_all()
        self.figures()

    def mono_cut(self, w0, lo):
        """Monotonic time between wall times w0 and lo (w0 < lo) in one run:
        the wall time less the time CLOCK_MONOTONIC stood still in the
        host's sleeps in between."""
        cut = lo - w0
        sl = self.m.sleeps
        i = bisect.bisect_left(self.sleep_ends, w0)
        while i < len(sl) and sl[i][0] < lo:
            s0, s1, m0, m1 = sl[i][:4]
            a = s0 if s0 > w0 else w0
            b = s1 if s1 < lo else lo
            if b > a:
                # The clock stopped for the sleep's wall time less its own
                # monotonic part (entering and leaving); pro rata if cut.
                stopped = max(0, (s1 - s0) - (m1 - m0))
                cut -= stopped * (b - a) // max(1, s1 - s0)
            i += 1
        return max(0, cut)

    def clip(self, ivs, flagged=True):
        """Keeps the part of each interval (w0, w1, t0, t1, ...) inside the
        window.  The monotonic start moves by the monotonic time cut off.
        With flagged, field 5 holds the flags and gets OPEN_START."""
        lo = self.start_w
        out = []
        for iv in ivs:
            w0, w1, t0, t1 = iv[0], iv[1], iv[2], iv[3]
            if w1 < lo or (w1 == lo and w0 < lo):
                continue
            if w0 < lo:
                t0 = min(t1, t0 + (self.mono_cut(w0, lo) if flagged
                                   else lo - w0))
                if flagged:
                    iv = (lo, w1, t0, t1, iv[4], iv[5] | OPEN_START) + iv[6:]
                else:
                    iv = (lo, w1, t0, t1) + iv[4:]
            out.append(iv)
        return out

    def clip_all(self):
        m = self.m
        lo = self.start_w
        m.sleeps.sort(key=lambda iv: iv[0])
        self.sleep_ends = [iv[1] for iv in m.sleeps]
        for s in m.sources.values():
            if s.intervals and s.intervals[-1][1] < lo:
                s.intervals = []
            elif s.intervals and s.intervals[0][0] < lo:
                s.intervals = self.clip(s.intervals)
        self.autosleep = self.clip(m.autosleep)
        self.sleeps = self.clip(m.sleeps, flagged=False)
        self.suspends = [r for r in m.suspends if r["w1"] >= lo]
        self.failed = [r for r in self.suspends if r["result"] != 0]
        self.backoffs = [b for b in m.backoffs if b[0] >= lo]
        reads = {}
        for w, n, uid in m.reads:
            if w >= lo:
                reads[uid] = reads.get(uid, 0) + n
        self.reads = reads       # uid (None: not said) -> wakeup_count reads
        runs = []
        for r in m.runs:
            if r[4] < lo:
                continue
            r = list(r)
            if r[2] < lo:
                r[1] = min(r[3], r[1] + self.mono_cut(r[2], lo))
                r[2] = lo
            runs.append(r)
        self.runs = runs
        counter = m.active_counter
        if counter and counter[0][0] < lo:
            n0 = 0
            first = 0
            for first, (w, n) in enumerate(counter):
                if w >= lo:
                    break
                n0 = n
            else:
                first = len(counter)
            counter = [(lo, n0)] + counter[first:]
        self.counter = counter

    def figures(self):
        # Autosleep-on intervals by run (disjoint, in order), for the
        # prevent-suspend time.
        by_run = {}
        for iv in self.autosleep:
            by_run.setdefault(iv[4], []).append((iv[2], iv[3]))
        starts = {r: [a for a, _ in ivs] for r, ivs in by_run.items()}
        bisect_left = bisect.bisect_left
        empty = ()
        for s in self.m.sources.values():
            active = 0
            prevent = 0
            longest = 0
            for iv in s.intervals:
                t0, t1 = iv[2], iv[3]
                d = t1 - t0
                active += d
                if d > longest:
                    longest = d
                ons = by_run.get(iv[4], empty)
                if ons:
                    j = bisect_left(starts[iv[4]], t1) - 1
                    while j >= 0:
                        a0, a1 = ons[j]
                        if a1 <= t0:
                            break
                        lo = t0 if t0 > a0 else a0
                        hi = t1 if t1 < a1 else a1
                        if hi > lo:
                            prevent += hi - lo
                        j -= 1
            s.active_us = active
            s.prevent_us = prevent
            s.count = len(s.intervals)
            s.longest = longest
        self.shown = [s for s in self.m.sources.values() if s.intervals]
        self.shown.sort(key=lambda s: (-s.prevent_us, -s.active_us, s.label()))
        # Time suspended vs awake.
        self.span_us = self.end_w - self.start_w
        self.running_us = sum(r[4] - r[2] for r in self.runs)
        self.awake_mono_us = sum(r[3] - r[1] for r in self.runs)
        slept = 0
        slept_mono = 0
        n_susp = 0
        for iv in self.sleeps:
            slept += iv[1] - iv[0]
            slept_mono += iv[3] - iv[2]
            if iv[4] == "suspend":
                n_susp += 1
        self.suspended_us = slept
        # Awake: the monotonic time powerfs ran, less the monotonic part of
        # the suspends (entering and leaving, inside the shaded periods).
        self.awake_us = max(0, self.awake_mono_us - slept_mono)
        self.n_suspends = n_susp
        self.n_sleeps = len(self.sleeps) - n_susp
        self.autosleep_us = sum(iv[3] - iv[2] for iv in self.autosleep)


def reads_text(rep):
    """The wakeup_count reads of the window, by uid, most first."""
    total = sum(rep.reads.values())
    if not total:
        return "none"
    by = sorted(rep.reads.items(), key=lambda kv: (-kv[1], kv[0] is None,
                                                   kv[0] or 0))
    parts = [f"uid {u} {n}" if u is not None else f"other uids {n}"
             for u, n in by[:5]]
    if len(by) > 5:
        parts.append(f"+{len(by) - 5} more uids")
    return f"{total} ({', '.join(parts)})"


def errname(result):
    if not result:
        return "OK"
    n = -result if result < 0 else result
    return errno_mod.errorcode.get(n, f"errno {n}")


def blocking_of(rec):
    """The sources that blocked a failed suspend: those that signalled an
    event, else the active ones."""
    names, more = rec["signalled"]
    if names or more:
        return names, more
    return rec["active"]


def cause_of(rec):
    names, more = blocking_of(rec)
    err = errname(rec["result"])
    step = rec["step"] or "-"
    who = ", ".join(map(safe_name, names)) + (f" +{more} more" if more else "")
    if rec["step"] == "freeze" and rec["result"] == -errno_mod.EBUSY and \
            (names or more):
        return f"wakeup event: {who}"
    if names or more:
        return f"{err} at step {step} (active: {who})"
    return f"{err} at step {step}"


# ---------------------------------------------------------------------------
# Formatting

def fmt_dur(us):
    """1h02m03.456s, 2m03.456s, 3.456s (milliseconds, rounded down)."""
    ms = us // 1000
    h, ms = divmod(ms, 3600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    if h:
        return f"{h}h{m:02d}m{s:02d}.{ms:03d}s"
    if m:
        return f"{m}m{s:02d}.{ms:03d}s"
    return f"{s}.{ms:03d}s"


def fmt_wall(us, date=True, ms=True):
    sec, frac = divmod(us, 1_000_000)
    tm = time.localtime(sec)
    out = time.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S", tm)
    if ms:
        out += f".{frac // 1000:03d}"
    return out


def pct(part, whole):
    return f"{100.0 * part / whole:.1f}%" if whole > 0 else "-"


def owner_text(s):
    if not s.owners:
        return "-"
    merged = {}
    for (cg, ns, uid), n in s.owners.items():
        k = (container_of(cg, ns), uid)
        merged[k] = merged.get(k, 0) + n
    items = sorted(merged.items(), key=lambda kv: (-kv[1], str(kv[0])))
    (cont, uid), _ = items[0]
    cont = safe_name(cont)
    out = f"{cont} uid {uid}" if uid is not None else cont
    if len(items) > 1:
        out += f" (+{len(items) - 1})"
    return out


def fmt_ms(us):
    """Wall microseconds as exact milliseconds for data attributes."""
    q, r = divmod(us, 1000)
    return str(q) if not r else f"{q}.{r:03d}"


# ---------------------------------------------------------------------------
# Text

def write_text(rep, top, out):
    m = rep.m
    p = out.append
    p(f"powerfs report: {fmt_wall(rep.start_w)} .. {fmt_wall(rep.end_w)} "
      f"({fmt_dur(rep.span_us)}){', last ' + fmt_dur(rep.since_us) if rep.since_us is not None else ''}")
    p(f"{m.events} events, {len(rep.shown)} active sources in the window, "
      f"{len(rep.runs)} powerfs run(s)")
    p("")
    p("Time")
    covered = rep.awake_us + rep.suspended_us
    p(f"  awake      {fmt_dur(rep.awake_us):>14}  {pct(rep.awake_us, covered):>6}")
    p(f"  suspended  {fmt_dur(rep.suspended_us):>14}  "
      f"{pct(rep.suspended_us, covered):>6}  ({rep.n_suspends} suspends, "
      f"{rep.n_sleeps} sleeps by others)")
    if rep.span_us - rep.running_us > 0:
        p(f"  no data    {fmt_dur(rep.span_us - rep.running_us):>14}  "
          "(powerfs not running)")
    p(f"  autosleep on {fmt_dur(rep.autosleep_us)}")
    p("")
    tables = [("prevent-suspend time (active while autosleep was on)",
               lambda s: s.prevent_us),
              ("active time", lambda s: s.active_us)]
    for title, key in tables:
        rows = sorted((s for s in rep.shown if key(s) > 0),
                      key=lambda s: (-key(s), s.label()))
        p(f"Top sources by {title}")
        if not rows:
            p("  (none)")
        for i, s in enumerate(rows[:top], 1):
            p(f"  {i:>3}. {s.label():<32} {fmt_dur(key(s)):>14} "
              f"{pct(key(s), rep.awake_us):>6}  {s.count} activations, "
              f"longest {fmt_dur(s.longest)}, {owner_text(s)}")
        if len(rows) > top:
            p(f"       ... {len(rows) - top} more")
        p("")
    n_att = len(rep.suspends)
    p(f"Failed suspends: {len(rep.failed)} of {n_att} attempts")
    causes = {}
    for r in rep.failed:
        c = cause_of(r)
        causes[c] = causes.get(c, 0) + 1
    for c, n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        p(f"  {n:>6}  {c}")
    if len(causes) > top:
        p(f"          ... {len(causes) - top} more causes")
    if rep.failed:
        p("  most recent:")
        for r in rep.failed[-top:]:
            p(f"    {fmt_wall(r['w1'])}  {r['by'] or '-':<9} {cause_of(r)}")
    p(f"wakeup_count reads: {reads_text(rep)}")
    if m.count_write_fail:
        p(f"wakeup_count writes refused: {m.count_write_fail}")
    if rep.backoffs:
        p(f"autosleep back-offs after backend failures: {len(rep.backoffs)}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# Chrome JSON trace

COUNTER_EXACT = 100_000
COUNTER_BUCKETS = 50_000


def bucket_max(counter, base, width):
    """Samples (w, v) of a step counter reduced to the highest value of each
    period of width us that has a change, at the period's start; then, when
    the next change is not in the next period, the value it ended with."""
    out = []
    append = out.append
    prev = 0                      # value before the current period
    cur = None                    # current period
    top = last = 0
    for w, v in counter:
        b = (w - base) // width
        if b != cur:
            if cur is not None:
                append((base + cur * width, top))
                if b != cur + 1 and top != last:
                    append((base + (cur + 1) * width, last))
                prev = last
            cur = b
            top = prev if prev > v else v
        elif v > top:
            top = v
        last = v
    if cur is not None:
        start = base + cur * width
        end = counter[-1][0]
        if top == last or end <= start:
            append((start, last if end <= start else top))
        else:
            append((start, top))
            append((end, last))
    return out


def write_trace(rep, f):
    base = rep.start_w
    q = json.dumps
    pid = 1
    out = []
    p = out.append
    p('{"traceEvents":[\n')
    p(q({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
         "args": {"name": "powerfs"}}))
    p(",\n" + q({"name": "process_labels", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"labels": "t=0 is " + fmt_wall(base)}}))
    meta = [(1, "suspended"), (2, "autosleep")]
    for i, s in enumerate(rep.shown):
        s.tid = 10 + i
        meta.append((s.tid, s.label()))
    for tid, name in meta:
        p(",\n" + q({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                     "args": {"name": name}}))
        p(",\n" + q({"name": "thread_sort_index", "ph": "M", "pid": pid,
                     "tid": tid, "args": {"sort_index": tid}}))
    for iv in rep.sleeps:
        w0, w1 = iv[0], iv[1]
        name = "suspended" if iv[4] == "suspend" else "sleep (not powerfs)"
        p(f',\n{{"name":"{name}","cat":"suspend","ph":"X","pid":1,"tid":1,'
          f'"ts":{w0 - base},"dur":{max(0, w1 - w0)}}}')
    for r in rep.failed:
        names, more = blocking_of(r)
        args = {"step": r["step"], "errno": errname(r["result"]),
                "result": r["result"], "by": r["by"],
                "blocking": [safe_name(n) for n in names] +
                ([f"+{more} more"] if more else []),
                "active": [safe_name(n) for n in r["active"][0]] +
                ([f"+{r['active'][1]} more"] if r["active"][1] else [])}
        ts = max(0, r["w1"] - base)
        p(",\n" + q({"name": "suspend failed: " + cause_of(r), "cat": "suspend",
                     "ph": "i", "s": "t", "pid": 1, "tid": 1, "ts": ts,
                     "args": args}))
    for b in rep.backoffs:
        p(",\n" + q({"name": "backoff", "cat": "suspend", "ph": "i", "s": "t",
                     "pid": 1, "tid": 1, "ts": b[0] - base,
                     "args": {"errno": errname(b[1]), "pause_ms": b[2]}}))
    for iv in rep.autosleep:
        w0, w1 = iv[0], iv[1]
        p(f',\n{{"name":{q("autosleep " + iv[6])},"cat":"autosleep","ph":"X",'
          f'"pid":1,"tid":2,"ts":{w0 - base},"dur":{max(0, w1 - w0)}}}')
    extra = ["", ',"args":{"open_start":true}', ',"args":{"open_end":true}',
             ',"args":{"open_start":true,"open_end":true}']
    # The bulk is written in pieces, to keep memory (and page faults) low.
    f.write("".join(out))
    out.clear()
    write = f.write
    for s in rep.shown:
        head = (f',\n{{"name":{q(s.label())},"cat":"wakelock","ph":"X","pid":1,'
                f'"tid":{s.tid},"ts":')
        # (Intervals never end before they begin: see Model.deactivate.)
        write("".join([f'{head}{w0 - base},"dur":{w1 - w0}{extra[fl & 3]}}}'
                       for w0, w1, _, _, _, fl in s.intervals]))
    # Active-source counter: one sample per change (the last of the same
    # microsecond); past COUNTER_EXACT changes, the highest value of each
    # of COUNTER_BUCKETS equal periods, and the track says so.
    counter = rep.counter
    if len(counter) <= COUNTER_EXACT:
        name = "active sources"
        samples = [(w, v) for (w, v), (w2, _) in zip(counter, counter[1:])
                   if w != w2] + counter[-1:]
    else:
        width = max(1000, -(-rep.span_us // COUNTER_BUCKETS))
        name = f"active sources (highest per {fmt_dur(width)})"
        samples = bucket_max(counter, base, width)
    head = f',\n{{"name":"{name}","ph":"C","pid":1,"ts":'
    write("".join([f'{head}{w - base},"args":{{"active":{v}}}}}'
                   for w, v in samples]))
    p('\n],\n"displayTimeUnit":"ms",\n"otherData":')
    p(q({"generator": PROG, "wall_start_us": base,
         "wall_start": fmt_wall(base), "wall_end": fmt_wall(rep.end_w)}))
    p("}\n")
    f.write("".join(out))


# ---------------------------------------------------------------------------
# HTML

def merge(bars, gap):
    """Bars (w0, w1, k, active_us, flags) closer than gap (us) become one,
    of k intervals."""
    out = []
    if not bars:
        return out
    a, b, k, act, fl = bars[0]
    for bar in bars[1:]:
        w0 = bar[0]
        if w0 - b < gap:
            if bar[1] > b:
                b = bar[1]
            k += bar[2]
            act += bar[3]
            fl = 0
        else:
            out.append((a, b, k, act, fl))
            a, b, k, act, fl = bar
    out.append((a, b, k, act, fl))
    return out


def merge_intervals(ivs, gap):
    """merge() straight from intervals (w0, w1, t0, t1, run, flags)."""
    out = []
    if not ivs:
        return out
    iv = ivs[0]
    a, b, k, fl = iv[0], iv[1], 1, iv[5]
    act = b - a
    for iv in itertools.islice(ivs, 1, None):
        w0 = iv[0]
        w1 = iv[1]
        if w0 - b < gap:
            if w1 > b:
                b = w1
            k += 1
            act += w1 - w0
            fl = 0
        else:
            out.append((a, b, k, act, fl))
            a = w0
            b = w1
            k = 1
            act = w1 - w0
            fl = iv[5]
    out.append((a, b, k, act, fl))
    return out


def merge_to_budget(rows, px_us, budget, intervals=False):
    """Merges each row's bars closer than one pixel, then doubles the
    distance while the rows together have more bars than the budget.
    Returns (rows, merge distance in px)."""
    gap_px = 1.0
    if intervals:
        rows = [merge_intervals(r, gap_px * px_us) for r in rows]
    else:
        rows = [merge(r, gap_px * px_us) for r in rows]
    while sum(len(r) for r in rows) > budget:
        gap_px *= 2
        rows = [merge(r, gap_px * px_us) for r in rows]
    return rows, gap_px


def nice_step(span_us, target=10):
    steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600,
             7200, 10800, 21600, 43200, 86400, 172800, 604800]
    for st in steps:
        if span_us / (st * 1e6) <= target:
            return st * 1_000_000
    return steps[-1] * 1_000_000


CSS = """
body{font:13px/1.35 sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
.meta{color:#555;margin-bottom:8px}
.legend span{display:inline-block;margin-right:14px;white-space:nowrap}
.sw{display:inline-block;width:14px;height:10px;vertical-align:middle;margin-right:4px;border:1px solid #0003}
.tl{overflow:auto;max-height:80vh;border:1px solid #ccc}
svg{display:block} svg text{font:11px sans-serif;fill:#222}
svg .ax text{fill:#555} svg .more{font-style:italic;fill:#555}
.src rect{fill:#2f6fb0} .src rect.m{fill:#5b8fc4}
.as rect{fill:#3a9a3a} .as rect.freeze{fill:#87c987}
.shade{fill:#f5b84a;fill-opacity:.28} .nodata{fill:url(#hatch)}
.fail{fill:#d62728} .bk{fill:#888}
table{border-collapse:collapse;margin:4px 0 8px} td,th{padding:2px 8px;border-bottom:1px solid #e5e5e5;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
#tip{position:fixed;pointer-events:none;background:#fffbe6;border:1px solid #999;padding:3px 6px;font:12px sans-serif;display:none;white-space:pre}
"""

JS = """
(function(){
var tip=document.getElementById('tip');
function f(ms){var d=new Date(ms);var p=function(n,w){return String(n).padStart(w||2,'0')};
return p(d.getHours())+':'+p(d.getMinutes())+':'+p(d.getSeconds())+'.'+p(d.getMilliseconds(),3);}
function dur(ms){return ms>=60000?Math.floor(ms/60000)+'m'+((ms%60000)/1000).toFixed(3)+'s':(ms/1000).toFixed(3)+'s';}
document.querySelector('svg').addEventListener('mousemove',function(ev){
var el=ev.target;if(!el.dataset||el.dataset.startMs===undefined){tip.style.display='none';return;}
var s=+el.dataset.startMs,e=+el.dataset.endMs,g=el.closest('g[data-src]');
var t=(g?g.dataset.src+'\\n':'')+f(s)+' .. '+f(e)+' ('+dur(e-s)+')';
if(el.dataset.merged)t+='\\n'+el.dataset.merged+' intervals merged, active '+dur(+el.dataset.activeMs);
var ti=el.querySelector('title');if(ti)t=ti.textContent;
tip.textContent=t;tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';});
document.querySelector('svg').addEventListener('mouseleave',function(){tip.style.display='none';});
})();
"""


OPEN_ATTR = ["", ' data-open-start="1"', ' data-open-end="1"',
             ' data-open-start="1" data-open-end="1"']


# Characters XML never allows, even escaped, and HTML calls errors: the C0
# and C1 controls but tab, newline and carriage return.  Names come here
# through safe_name(), which leaves none; the page shows any other as \xNN.
CONTROLS_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def esc(text):
    """Text or an attribute value for the page: HTML-escaped, controls
    made visible.  A name must be safe_name() first."""
    return html.escape(CONTROLS_RE.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text))


def write_html(rep, top, max_rows, f):
    m = rep.m
    w_lo, w_hi = rep.start_w, rep.end_w
    span = max(1, w_hi - w_lo)
    scale = PLOT_W / span            # px per us
    px_us = span / PLOT_W            # us per px

    def X(w):
        return LABEL_W + (w - w_lo) * scale

    shown = rep.shown[:max_rows]
    hidden = rep.shown[max_rows:]
    # Bars: (w0, w1, k, active wall us)
    rows, bar_gap = merge_to_budget([s.intervals for s in shown], px_us,
                                    BAR_BUDGET, intervals=True)
    shades, shade_gap = merge_to_budget(
        [[(iv[0], iv[1], 1, iv[1] - iv[0], 0) for iv in rep.sleeps]],
        px_us, SHADE_BUDGET)
    shades = shades[0]
    as_on = {}
    for iv in rep.autosleep:
        as_on.setdefault(iv[6] if iv[6] == "freeze" else "mem", []).append(
            (iv[0], iv[1], 1, iv[1] - iv[0], 0))
    as_keys = sorted(as_on)
    as_rows, _ = merge_to_budget([as_on[k] for k in as_keys], px_us,
                                 AUTOSLEEP_BUDGET)
    # Failed suspends, grouped by pixel.
    fails = []
    fgap = 3.0
    while True:
        fails = []
        for r in rep.failed:
            if fails and r["w1"] - fails[-1][1] < fgap * px_us:
                fails[-1][1] = r["w1"]
                fails[-1][2].append(r)
            else:
                fails.append([r["w1"], r["w1"], [r]])
        if len(fails) <= FAIL_BUDGET:
            break
        fgap *= 2
    src_row = {s.key: i for i, s in enumerate(shown)}
    by_name = {}
    for s in shown:
        by_name.setdefault(s.name, s.key)

    top_h = 28                       # axis
    sys_rows = ["suspend", "autosleep"]
    y0 = top_h + len(sys_rows) * ROW_H + 6
    height = y0 + len(shown) * ROW_H + (ROW_H + 4 if hidden else 0) + 8
    width = LABEL_W + PLOT_W + 10
    o = []
    p = o.append
    p(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
      f'viewBox="0 0 {width} {height}" data-start-ms="{fmt_ms(w_lo)}" '
      f'data-end-ms="{fmt_ms(w_hi)}" data-plot-x="{LABEL_W}" data-plot-w="{PLOT_W}" '
      f'data-merge-px="{bar_gap:g}">')
    p('<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
      'patternTransform="rotate(45)"><rect width="3" height="6" fill="#0000001a"/>'
      '</pattern></defs>')
    # Row stripes: one path for all the even rows.
    if shown:
        d = "".join(f"M{LABEL_W} {y0 + i * ROW_H}h{PLOT_W}v{ROW_H}h-{PLOT_W}z"
                    for i in range(0, len(shown), 2))
        p(f'<path d="{d}" fill="#f4f6f8"/>')
    # Axis.
    step = nice_step(span)
    # Ticks on round local times.
    off = time.localtime(w_lo // 10**6).tm_gmtoff * 10**6
    first = ((w_lo + off) // step + 1) * step - off
    p('<g class="ax">')
    grid = []
    w = first
    last_day = None
    while w <= w_hi:
        x = X(w)
        grid.append(f"M{x:.1f} {top_h - 4}V{height - 4}")
        tm = time.localtime(w // 10**6)
        day = (tm.tm_year, tm.tm_yday)
        label = time.strftime("%H:%M:%S" if step < 60_000_000 else "%H:%M", tm)
        if day != last_day:
            label = time.strftime("%b %d ", tm) + label
            last_day = day
        p(f'<text x="{x:.1f}" y="{top_h - 8}" text-anchor="middle">{label}</text>')
        w += step
    p('</g>')
    if grid:
        p(f'<path d="{"".join(grid)}" stroke="#0000001c" stroke-width="1"/>')
    body_top = top_h
    body_h = height - 4 - top_h
    # Powerfs not running: hatched, across all rows.
    gaps = []
    prev = w_lo
    for r in rep.runs:
        if r[2] - prev > 0:
            gaps.append((prev, r[2]))
        prev = max(prev, r[4])
    if w_hi - prev > 0:
        gaps.append((prev, w_hi))
    gaps = merge([(a, b, 1, b - a, 0) for a, b in gaps], px_us)
    for a, b, _, _, _ in gaps:
        p(f'<rect class="nodata" x="{X(a):.2f}" y="{body_top}" width="{max(MIN_BAR_W, (b - a) * scale):.2f}" '
          f'height="{body_h}" data-start-ms="{fmt_ms(a)}" data-end-ms="{fmt_ms(b)}">'
          f'<title>powerfs not running: {fmt_wall(a)} .. {fmt_wall(b)}</title></rect>')
    # Suspended periods, shaded across all rows.
    p('<g class="susp">')
    for a, b, k, act, _ in shades:
        extra = f' data-merged="{k}" data-active-ms="{fmt_ms(act)}"' if k > 1 else ""
        p(f'<rect class="shade" x="{X(a):.2f}" y="{body_top}" '
          f'width="{max(MIN_BAR_W, (b - a) * scale):.2f}" height="{body_h}" '
          f'data-start-ms="{fmt_ms(a)}" data-end-ms="{fmt_ms(b)}"{extra}/>')
    p('</g>')
    # System rows: labels.
    for i, name in enumerate(sys_rows):
        y = top_h + i * ROW_H
        p(f'<text x="{LABEL_W - 6}" y="{y + ROW_H - 4}" text-anchor="end" '
          f'font-weight="bold">{name}</text>')
    # Autosleep row.
    y = top_h + ROW_H
    for key, bars in zip(as_keys, as_rows):
        p(f'<g class="as" data-state="{esc(key)}" transform="translate(0,{y + 3})">')
        for a, b, k, act, _ in bars:
            cls = ' class="freeze"' if key == "freeze" else ""
            extra = f' data-merged="{k}"' if k > 1 else ""
            p(f'<rect{cls} x="{X(a):.2f}" width="{max(MIN_BAR_W, (b - a) * scale):.2f}" '
              f'height="{ROW_H - 6}" data-start-ms="{fmt_ms(a)}" data-end-ms="{fmt_ms(b)}"{extra}/>')
        p('</g>')
    # Failed suspends: a red triangle on the suspend row (hover: the
    # blocking sources), a label when there is room, and a tick on the
    # blocking source's row.
    ticks = []
    label_right = -1e9
    p('<g class="fails">')
    y = top_h
    for a, b, recs in fails:
        x = X(b)
        causes = {}
        for r in recs:
            c = cause_of(r)
            causes[c] = causes.get(c, 0) + 1
        if len(recs) == 1:
            r = recs[0]
            title = (f"suspend failed at {fmt_wall(r['w1'])} "
                     f"({r['by'] or 'state'}): {cause_of(r)}")
        else:
            title = (f"{len(recs)} failed suspends {fmt_wall(a)} .. {fmt_wall(b)}: " +
                     "; ".join(f"{n}x {c}" for c, n in
                               sorted(causes.items(), key=lambda kv: -kv[1])[:5]))
        blockers = []
        for r in recs:
            names, _ = blocking_of(r)
            for nm in names:
                if nm not in blockers:
                    blockers.append(nm)
        extra = f' data-merged="{len(recs)}"' if len(recs) > 1 else ""
        p(f'<path class="fail" d="M{x:.2f} {y + 2}l4 0l-4 {ROW_H - 4}l-4 -{ROW_H - 4}z" '
          f'data-start-ms="{fmt_ms(a)}" data-end-ms="{fmt_ms(b)}" '
          f'data-blocking="{esc(" ".join(map(safe_name, blockers)))}"{extra}>'
          f'<title>{esc(title)}</title></path>')
        if blockers and x - 10 > label_right and len(fails) <= 40:
            text = safe_name(blockers[0]) + \
                (f" +{len(blockers) - 1}" if len(blockers) > 1 else "")
            p(f'<text class="flabel" x="{x + 6:.1f}" y="{y + ROW_H - 4}" fill="#b00">{esc(text)}</text>')
            label_right = x + 6 + 6.5 * len(text) + 8
        for nm in blockers:
            key = by_name.get(nm)
            if key is not None and len(ticks) < FAIL_BUDGET:
                ticks.append((x, src_row[key]))
    p('</g>')
    if ticks:
        d = "".join(f"M{x:.2f} {y0 + row * ROW_H}v{ROW_H}" for x, row in ticks)
        p(f'<path class="fticks" d="{d}" stroke="#d62728" stroke-width="2"/>')
    # Source rows.
    for i, (s, bars) in enumerate(zip(shown, rows)):
        y = y0 + i * ROW_H
        label = s.label()
        short = label if len(label) <= 32 else label[:30] + "…"
        p(f'<g class="src" data-src="{esc(label)}" '
          f'data-key="{esc(s.hex or safe_name(s.name))}" '
          f'transform="translate(0,{y})">')
        p(f'<text x="{LABEL_W - 6}" y="{ROW_H - 4}" text-anchor="end" '
          f'textLength="{min(LABEL_W - 10, 6.2 * len(short)):.0f}" '
          f'lengthAdjust="spacingAndGlyphs">{esc(short)}</text>'
          if len(short) > 30 else
          f'<text x="{LABEL_W - 6}" y="{ROW_H - 4}" text-anchor="end">{esc(short)}</text>')
        for a, b, k, act, fl in bars:
            if k > 1:
                p(f'<rect class="m" x="{X(a):.2f}" y="2" width="{max(MIN_BAR_W, (b - a) * scale):.2f}" '
                  f'height="{ROW_H - 4}" data-start-ms="{fmt_ms(a)}" data-end-ms="{fmt_ms(b)}" '
                  f'data-merged="{k}" data-active-ms="{fmt_ms(act)}" '
                  f'fill-opacity="{0.35 + 0.65 * act / max(1, b - a):.2f}"/>')
            else:
                p(f'<rect x="{X(a):.2f}" y="2" width="{max(MIN_BAR_W, (b - a) * scale):.2f}" '
                  f'height="{ROW_H - 4}" data-start-ms="{fmt_ms(a)}" data-end-ms="{fmt_ms(b)}"'
                  f'{OPEN_ATTR[fl & 3]}/>')
        p('</g>')
    if hidden:
        y = y0 + len(shown) * ROW_H
        act = sum(s.active_us for s in hidden)
        p(f'<text class="more" x="{LABEL_W - 6}" y="{y + ROW_H - 2}" text-anchor="end" '
          f'data-more="{len(hidden)}">{len(hidden)} more sources</text>')
        p(f'<text class="more" x="{LABEL_W + 4}" y="{y + ROW_H - 2}">not drawn '
          f'(active {esc(fmt_dur(act))} in all; --rows={len(rep.shown)} draws them)</text>')
    p('</svg>')
    svg = "".join(o)

    # The page around it.
    h = []
    a = h.append
    title = f"powerfs report {fmt_wall(w_lo, ms=False)} .. {fmt_wall(w_hi, ms=False)}"
    a("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
    a(f"<title>{esc(title)}</title><style>{CSS}</style></head><body>")
    a(f"<h1>{esc(title)}</h1>")
    tz = time.strftime("%Z (UTC%z)", time.localtime(w_lo // 10**6))
    covered = rep.awake_us + rep.suspended_us
    a(f'<div class="meta">{m.events} events; window {fmt_dur(rep.span_us)}'
      f"{' (last ' + fmt_dur(rep.since_us) + ')' if rep.since_us is not None else ''}; "
      f"times in {esc(tz)}. Awake {fmt_dur(rep.awake_us)} ({pct(rep.awake_us, covered)}), "
      f"suspended {fmt_dur(rep.suspended_us)} ({pct(rep.suspended_us, covered)}) in "
      f"{rep.n_suspends} suspends"
      f"{f' and {rep.n_sleeps} sleeps by others' if rep.n_sleeps else ''}; "
      f"{len(rep.failed)} of {len(rep.suspends)} suspend attempts failed; "
      f"{len(rep.shown)} sources active.</div>")
    notes = []
    if bar_gap > 1:
        notes.append(f"bars closer than {bar_gap:g} px merged")
    else:
        notes.append("bars closer than 1 px merged")
    if shade_gap > 1:
        notes.append(f"suspended periods closer than {shade_gap:g} px merged")
    a('<div class="legend">'
      '<span><i class="sw" style="background:#2f6fb0"></i>source active</span>'
      '<span><i class="sw" style="background:#5b8fc4;opacity:.6"></i>merged bars '
      '(fainter: active a smaller share)</span>'
      '<span><i class="sw" style="background:#f5b84a;opacity:.5"></i>suspended</span>'
      '<span><i class="sw" style="background:#3a9a3a"></i>autosleep mem</span>'
      '<span><i class="sw" style="background:#87c987"></i>autosleep freeze</span>'
      '<span><i class="sw" style="background:#d62728"></i>failed suspend (hover: cause; '
      'red tick: blocking source)</span>'
      '<span><i class="sw" style="background:repeating-linear-gradient(45deg,#ddd 0 3px,#fff 3px 6px)">'
      '</i>powerfs not running</span>'
      f'<span>({esc("; ".join(notes))})</span></div>')
    a(f'<div class="tl">{svg}</div>')

    def table(title, key, col):
        rows_ = sorted((s for s in rep.shown if key(s) > 0),
                       key=lambda s: (-key(s), s.label()))
        a(f"<h2>Top sources by {esc(title)}</h2>")
        if not rows_:
            a("<p>None.</p>")
            return
        a(f'<table data-table="{col}"><tr><th>#</th><th>source</th>'
          "<th>active time</th><th>prevent-suspend</th>"
          f"<th>{'active' if col == 'active' else 'prevent-suspend'} / awake</th>"
          "<th>activations</th><th>longest</th><th>taken by</th></tr>")
        for i, s in enumerate(rows_[:top], 1):
            act = f"<b>{fmt_dur(s.active_us)}</b>" if col == "active" \
                else fmt_dur(s.active_us)
            prev = f"<b>{fmt_dur(s.prevent_us)}</b>" if col == "prevent" \
                else fmt_dur(s.prevent_us)
            a(f'<tr><td class="n">{i}</td><td>{esc(s.label())}</td>'
              f'<td class="n">{act}</td><td class="n">{prev}</td>'
              f'<td class="n">{pct(key(s), rep.awake_us)}</td>'
              f'<td class="n">{s.count}</td><td class="n">{fmt_dur(s.longest)}</td>'
              f"<td>{esc(owner_text(s))}</td></tr>")
        a("</table>")
        if len(rows_) > top:
            a(f"<p>{len(rows_) - top} more.</p>")

    table("prevent-suspend time", lambda s: s.prevent_us, "prevent")
    table("active time", lambda s: s.active_us, "active")
    a("<h2>Failed suspends</h2>")
    if rep.failed:
        causes = {}
        for r in rep.failed:
            c = cause_of(r)
            causes[c] = causes.get(c, 0) + 1
        a('<table data-table="causes"><tr><th>count</th><th>cause</th></tr>')
        for c, n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
            a(f'<tr><td class="n">{n}</td><td>{esc(c)}</td></tr>')
        a("</table>")
    else:
        a("<p>None.</p>")
    a(f'<p data-reads="{sum(rep.reads.values())}">wakeup_count reads: '
      f"{esc(reads_text(rep))}</p>")
    a('<div id="tip"></div>')
    a(f"<script>{JS}</script></body></html>\n")
    f.write("".join(h))


# ---------------------------------------------------------------------------
# Command line

DUR_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
DUR_UNIT = {"ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6, "d": 86400e6,
            "w": 604800e6}


def parse_duration(text):
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return int(float(text) * 1e6)
    if not text or not re.fullmatch(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+", text):
        raise UsageError(f"--since: bad duration {text!r} (e.g. 90s, 10m, 2h, 1d)")
    return int(sum(float(n) * DUR_UNIT[u] for n, u in DUR_RE.findall(text)))


def parse_args(argv):
    opts = {"since": None, "top": 10, "rows": 100, "mode": None, "out": None}
    files = []
    i = 0
    only_files = False
    while i < len(argv):
        arg = argv[i]
        i += 1
        if only_files or not arg.startswith("--") or arg == "-":
            files.append(arg)
            continue
        if arg == "--":
            only_files = True
            continue
        name, eq, val = arg.partition("=")
        if name in ("--help", "-h"):
            return None, None
        if name in ("--since", "--top", "--rows", "--html", "--trace") and not eq:
            if i >= len(argv):
                raise UsageError(f"{name} needs a value")
            val = argv[i]
            i += 1
        if name == "--since":
            opts["since"] = parse_duration(val)
        elif name in ("--top", "--rows"):
            if not val.isdigit() or int(val) < 1:
                raise UsageError(f"{name}: expected a positive integer, got {val!r}")
            opts[name[2:]] = int(val)
        elif name in ("--html", "--trace", "--text"):
            if opts["mode"]:
                raise UsageError("give one of --html, --trace or --text")
            if name == "--text" and eq:
                raise UsageError("--text takes no value")
            if name != "--text" and not val:
                raise UsageError(f"{name} needs a file name")
            opts["mode"] = name[2:]
            opts["out"] = val or None
        else:
            raise UsageError(f"unknown option {arg!r}")
    if not opts["mode"]:
        raise UsageError("give one of --html=FILE, --trace=FILE or --text")
    if not files:
        raise UsageError("no journal given")
    return opts, files


def load(files, want_counter=True):
    """Reads every journal, oldest first (by their first event), and replays
    them in one model."""
    journals = []
    try:
        for path in files:
            journals.append(Journal(path))
        order = sorted(range(len(journals)), key=lambda i: (
            journals[i].first_wall is None, journals[i].first_wall or 0, i))
        model = Model(want_counter)
        warnings = []
        for i in order:
            j = journals[i]
            for events, line_of in j.chunks():
                model.feed(events, j.path, line_of)
            warnings.extend(j.warnings)
        model.finish()
    finally:
        for j in journals:
            j.close()
    return model, warnings


USAGE = ("Usage: powerfs-report [--since=DURATION] [--top=N] [--rows=N]\n"
         "         (--html=FILE | --trace=FILE | --text) JOURNAL...")


def main(argv):
    try:
        opts, files = parse_args(argv)
    except UsageError as e:
        print(f"{PROG}: {e}\nTry '{PROG} --help'.", file=sys.stderr)
        return 2
    if opts is None:
        sys.stdout.write(USAGE + "\n" + __doc__.split("\n", 2)[2])
        return 0
    try:
        model, warnings = load(files, want_counter=opts["mode"] == "trace")
    except InputError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    for w in warnings:
        print(f"{PROG}: warning: {w}", file=sys.stderr)
    if model.events == 0:
        print(f"{PROG}: no events in {', '.join(files)}", file=sys.stderr)
        return 2
    rep = Report(model, opts["since"])
    mode, out = opts["mode"], opts["out"]
    try:
        if mode == "text":
            sys.stdout.write(write_text(rep, opts["top"], []))
            sys.stdout.flush()
        elif out == "-":
            (write_html if mode == "html" else write_trace)(
                *((rep, opts["top"], opts["rows"]) if mode == "html" else (rep,)),
                sys.stdout)
            sys.stdout.flush()
        else:
            tmp = f"{out}.tmp{os.getpid()}"
            try:
                with open(tmp, "w", encoding="utf-8") as f:
                    if mode == "html":
                        write_html(rep, opts["top"], opts["rows"], f)
                    else:
                        write_trace(rep, f)
                os.replace(tmp, out)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except OSError as e:
        print(f"{PROG}: {out or 'standard output'}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
