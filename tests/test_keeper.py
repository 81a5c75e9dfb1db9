"""The mount outlives powerfs's processes: crashes of the server, live
upgrades (SIGHUP), the death of the keeper, systemd's fd store; and the
ways a start or an end must not leave a dead mount behind.

The load the crash and upgrade tests run through it all, in other
processes: writers taking new wake locks (each acknowledged lock is
recorded), readers blocked in wakeup_count behind a held lock, and a
reader in a mount namespace of its own that reads through a bind of the
mount, as a container does.  None of them may see an error; every
acknowledged lock must be there at the end; every blocked reader must get
the right count once the locks go.
"""

import errno
import os
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import time

import pytest

import conftest
from conftest import (FUSERMOUNT, POWERFS, PYTHON, Powerfs, Reader, _live,
                      children, wait_in_syscall, wait_until)

# Locks and unlocks NAMES names in turn (lock p_0, unlock p_0, lock p_1,
# ...), one open and write per operation, and prints the operation's number
# once write() returned; stops before the next operation once the stop
# file exists.
_WRITER = r'''
import os, sys
mnt, prefix, stop = sys.argv[1], sys.argv[2], sys.argv[3]
NAMES = 16
i = 0
while not os.path.exists(stop):
    name = b"%s_%d" % (prefix.encode(), (i // 2) % NAMES)
    try:
        fd = os.open(os.path.join(mnt, "wake_unlock" if i % 2 else "wake_lock"),
                     os.O_WRONLY)
        try:
            os.write(fd, name)
        finally:
            os.close(fd)
    except OSError as e:
        print("error", e.errno, flush=True)
        sys.exit(1)
    print(i, flush=True)
    i += 1
'''
WRITER_NAMES = 16


# Run in a mount namespace of its own: binds the mount elsewhere and reads
# through the bind until killed; prints every error, and a count of reads
# from time to time.
_NS_READER = r'''
import os, subprocess, sys, tempfile
mnt = sys.argv[1]
view = tempfile.mkdtemp(prefix="powerfs-ns-view-")
subprocess.run(["mount", "--bind", mnt, view], check=True)
print("ready", flush=True)
n = 0
while True:
    for name in ("state", "wake_unlock", "suspend_stats/success"):
        try:
            fd = os.open(os.path.join(view, name), os.O_RDONLY)
            try:
                os.read(fd, 65536)
            finally:
                os.close(fd)
        except OSError as e:
            print("error", name, e.errno, flush=True)
        n += 1
    if n % 300 == 0:
        print("reads", n, flush=True)
'''


class Lines:
    """The output of a child process, line by line, without blocking."""

    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buf = b""
        self.lines = []

    def poll(self):
        if self.proc.stdout.closed:
            return self.lines
        try:
            while True:
                c = os.read(self.proc.stdout.fileno(), 65536)
                if not c:
                    break
                self.buf += c
        except BlockingIOError:
            pass
        *done, self.buf = self.buf.split(b"\n")
        self.lines += [x.decode() for x in done]
        return self.lines

    def errors(self):
        return [x for x in self.poll() if x.startswith("error")]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        os.set_blocking(self.proc.stdout.fileno(), True)
        self.buf += self.proc.stdout.read()
        self.buf += b"\n"
        self.poll()
        self.proc.stdout.close()


class Load:
    def __init__(self, p, writers=2, readers=3):
        self.p = p
        p.lock("held")
        self.stop = os.path.join(p.tmpdir, "stop-writers")
        self.writers = [Lines([PYTHON, "-c", _WRITER, p.mnt, f"w{i}",
                               self.stop]) for i in range(writers)]
        self.readers = [Reader(p.path("wakeup_count"))
                        for _ in range(readers)]
        for r in self.readers:
            r.wait_in_read()
        self.ns_reader = Lines(["unshare", "--mount", "--propagation",
                                "private", PYTHON, "-c", _NS_READER, p.mnt])
        assert wait_until(lambda: "ready" in self.ns_reader.poll()
                          or self.ns_reader.proc.poll() is not None,
                          timeout=10), self.ns_reader.poll()
        assert "ready" in self.ns_reader.poll(), self.ns_reader.poll()

    def acked(self, w):
        return sum(1 for x in w.poll() if x.isdigit())

    def wait_progress(self):
        """Every writer acknowledges one more lock, the namespace reader
        goes on reading."""
        before = [self.acked(w) for w in self.writers]
        reads = len(self.ns_reader.poll())
        assert wait_until(lambda: all(self.acked(w) > n for w, n in
                                      zip(self.writers, before)) and
                          len(self.ns_reader.poll()) > reads
                          and not self.errors(), timeout=10), \
            (self.errors(), self.p.log()[-2000:])

    def errors(self):
        return [e for w in (*self.writers, self.ns_reader)
                for e in w.errors()]

    def check_and_stop(self):
        """Stops the clients; checks that none saw an error, that every
        acknowledged operation counted (the active locks, and each lock's
        active_count in wakeup_sources), and that the blocked readers get
        the count once every lock is released.  Returns the number of
        acknowledged operations."""
        for r in self.readers:
            assert r.blocked(0.05), f"a reader returned: {r.result()}"
        open(self.stop, "w").close()
        for w in self.writers:
            w.proc.wait(10)
        self.ns_reader.kill()
        for w in self.writers:
            w.kill()
        assert self.errors() == []
        expect_active = {b"held"}
        expect_counts = {}
        total = 0
        for i, w in enumerate(self.writers):
            ops = [int(x) for x in w.lines if x.isdigit()]
            assert ops == list(range(len(ops)))
            total += len(ops)
            for n in range(0, len(ops), 2):
                name = f"w{i}_{(n // 2) % WRITER_NAMES}".encode()
                expect_counts[name] = expect_counts.get(name, 0) + 1
            if len(ops) % 2:
                expect_active.add(
                    f"w{i}_{((len(ops) - 1) // 2) % WRITER_NAMES}".encode())
        assert set(self.p.active()) == expect_active
        sources = self.p.sources()
        counts = {name: sources[name].active_count for name in expect_counts}
        assert counts == expect_counts, "acknowledged operations lost"
        for name in expect_active:
            self.p.unlock(name)
        count = self.p.count()
        for r in self.readers:
            n, err, data = r.result(10)
            assert (n, err, data) == (len(data), 0, b"%d\n" % count)
            r.kill()
        return total


def serving_again(p, name="state"):
    """One open and read of name; returns when a server answered."""
    fd = os.open(p.path(name), os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def figures(label, gaps):
    ms = sorted(g * 1000 for g in gaps)
    return (f"{label}: {len(ms)} cycles, gap until served again: median "
            f"{statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms")


def mode():
    return (" (processed again, as before Linux 6.9)"
            if os.environ.get("POWERFS_NO_RESEND") else " (sent again)")


def report(capsys, line):
    with capsys.disabled():
        print(f"\n  {line}")


# "replay": the path of kernels before 6.9 (Debian 12's 6.1), which cannot
# send a server's unanswered requests to the next one (FUSE_NOTIFY_RESEND):
# the next server processes them again from the copies kept in the session
# file (inflight.c).  POWERFS_NO_RESEND makes powerfs take that path here.
@pytest.fixture(params=["resend", "replay"])
def powerfs(request, monkeypatch):
    if request.param == "replay":
        monkeypatch.setenv("POWERFS_NO_RESEND", "1")
    p = Powerfs().start()
    yield p
    p.stop()


# 100 cycles, each waiting (with its own deadlines) for the writers and the
# reader to make progress and for a new server: about 10 s on an idle
# machine, more than the default watchdog's 30 s beside two CPU hogs.
@pytest.mark.timeout(300)
def test_100_crashes_of_the_server_cost_clients_nothing(powerfs, capsys):
    p = powerfs
    load = Load(p)
    gaps = []
    servers = []
    for _ in range(100):
        load.wait_progress()
        server = p.server_pid()
        servers.append(server)
        t0 = time.monotonic()
        os.kill(server, signal.SIGKILL)
        assert wait_until(lambda: gone(server), timeout=5)
        assert serving_again(p) == b"freeze mem disk\n"
        gaps.append(time.monotonic() - t0)
    load.wait_progress()
    acked = load.check_and_stop()
    # 100 servers killed, each replaced by the same keeper.
    assert len(set(servers)) == 100 and p.server_pid() not in servers
    assert p.alive()
    assert "the server died (Killed): starting another" in p.log()
    # Without FUSE_NOTIFY_RESEND, the blocked readers (at least) were
    # processed again after every kill.
    replays = len(re.findall(r"unanswered: processing (it|them) again", p.log()))
    assert replays == (100 if os.environ.get("POWERFS_NO_RESEND") else 0)
    report(capsys, figures("kill -9 of the server" + mode(), gaps) +
           f"; {acked} lock/unlock writes acknowledged, none lost")


def test_10_upgrades_cost_clients_nothing(powerfs, capsys):
    p = powerfs
    load = Load(p)
    gaps = []
    for _ in range(10):
        load.wait_progress()
        server = p.server_pid()
        t0 = time.monotonic()
        os.kill(p.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: gone(server), timeout=5)
        assert serving_again(p) == b"freeze mem disk\n"
        gaps.append(time.monotonic() - t0)
        # The same keeper, a new server.
        assert p.alive() and p.server_pid() != server
    load.wait_progress()
    load.check_and_stop()
    log = p.log()
    assert log.count("handing the mount over to") == 10
    assert log.count("taking the connection over from the previous "
                     "keeper") == 10
    # Without FUSE_NOTIFY_RESEND, each server answered the blocked readers
    # the one before had left (and whatever else it was given).
    replays = len(re.findall(r"unanswered: processing (it|them) again", log))
    assert replays == (10 if os.environ.get("POWERFS_NO_RESEND") else 0), log
    report(capsys, figures("SIGHUP upgrade" + mode(), gaps))


def test_settings_and_statistics_survive_a_crash(powerfs):
    p = powerfs
    p.lock("a", "b 100000000000")
    p.unlock("b", "a")
    os.chmod(p.path("wake_lock"), 0o664)
    os.chown(p.path("wake_unlock"), 123, 456)
    count = p.count()
    assert p.write("wakeup_count", str(count)) == len(str(count))
    p.lock("a")
    before = p.read_all("wakeup_sources")
    os.kill(p.server_pid(), signal.SIGKILL)
    assert serving_again(p) == b"freeze mem disk\n"
    after = p.read_all("wakeup_sources")
    # The same sources and counts.
    assert [line.split()[:5] for line in before.splitlines()] == \
        [line.split()[:5] for line in after.splitlines()]
    assert p.active() == [b"a"]
    assert p.inactive() == [b"b"]
    assert os.stat(p.path("wake_lock")).st_mode & 0o777 == 0o664
    st = os.stat(p.path("wake_unlock"))
    assert (st.st_uid, st.st_gid) == (123, 456)
    assert "handshake armed" in p.log()
    p.unlock("a")
    # The registered count went on from where it was.
    assert p.count() == count + 1


def test_the_keeper_killed_its_server_keeps_the_mount():
    """kill -9 of the keeper: its server takes its place (and starts a
    server of its own); the lock stays, nobody sees an error."""
    p = Powerfs().start()
    try:
        p.lock("kept")
        server = p.server_pid()
        r = Reader(p.path("wakeup_count"))
        r.wait_in_read()
        os.kill(p.proc.pid, signal.SIGKILL)
        p.proc.wait(5)
        assert wait_until(lambda: children(server), timeout=5), p.log()
        assert serving_again(p) == b"freeze mem disk\n"
        assert p.active() == [b"kept"]
        assert r.blocked(0.05)
        p.unlock("kept")
        count = p.count()
        assert r.result(5)[:2] == (len(b"%d\n" % count), 0)
        assert "the keeper died: this server becomes the keeper" in p.log()
        # The new keeper stops like the first: SIGTERM, unmount, exit.
        new_server = children(server)[0]
        os.kill(server, signal.SIGTERM)
        assert wait_until(lambda: gone(server) and gone(new_server), timeout=5)
        assert not os.path.ismount(p.mnt)
        assert "no longer kept (exit status 0)" in p.log()
    finally:
        _live.discard(p)
        p.force_cleanup()


_STATE_WRITER = r"""
import errno, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
print("ready", flush=True)
t = time.monotonic()
try:
    res = str(os.write(fd, b"mem"))
except OSError as e:
    res = errno.errorcode[e.errno]
print(res, "%.3f" % (time.monotonic() - t), flush=True)
"""


def left_unanswered(log):
    """How many requests the last server found left by its predecessor."""
    found = re.findall(r"left (\d+) requests? unanswered: processing", log)
    return int(found[-1]) if found else 0


def kill_server_and_wait(p):
    server = p.server_pid()
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: gone(server), timeout=5)
    assert serving_again(p) == b"freeze mem disk\n"


@pytest.mark.parametrize("path", ["resend", "replay"])
def test_blocked_readers_of_a_killed_server_are_answered(monkeypatch, path):
    """The wakeup_count readers the killed server held (one through
    read(2), one as busybox cat reads: sendfile(2), or read(2) where
    powerfs refuses sendfile through the page cache, Linux 6.5 and later)
    are answered by the next server: sent again by the kernel, or (before
    Linux 6.9) processed again from the copies kept in the session file."""
    if path == "replay":
        monkeypatch.setenv("POWERFS_NO_RESEND", "1")
    p = Powerfs().start()
    try:
        p.lock("held")
        readers = [Reader(p.path("wakeup_count")),
                   Reader(p.path("wakeup_count"), call="cat")]
        for r in readers:
            r.wait_in_read()
        # The server reads requests in the order they came: once this one
        # is answered, it has read (and parked) the two above.
        assert serving_again(p) == b"freeze mem disk\n"
        kill_server_and_wait(p)
        if path == "replay":
            assert left_unanswered(p.log()) >= 2, p.log()
        for r in readers:
            assert r.blocked(0.05)
        p.unlock("held")
        count = p.count()
        for r in readers:
            assert r.result(5) == (len(b"%d\n" % count), 0, b"%d\n" % count)
            r.kill()
    finally:
        p.stop()


@pytest.mark.parametrize("path", ["resend", "replay"])
def test_a_state_write_left_by_a_killed_server_is_not_run_twice(monkeypatch,
                                                                path):
    """A state write the killed server was suspending for is answered by
    the next server with EBUSY, not run a second time (the first run may
    have suspended the machine already), whether the kernel sends it again
    or (before Linux 6.9) the copy is processed again."""
    if path == "replay":
        monkeypatch.setenv("POWERFS_NO_RESEND", "1")
    p = Powerfs("--simulate-sleep-ms=20000").start()
    writer = subprocess.Popen([PYTHON, "-c", _STATE_WRITER, p.path("state")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "ready\n"
        wait_in_syscall(writer, {"x86_64": ("1",), "aarch64": ("64",)}, "write")
        assert serving_again(p) == b"freeze mem disk\n"
        kill_server_and_wait(p)
        result, seconds = writer.stdout.readline().split()
        assert result == "EBUSY" and float(seconds) < 10, (result, seconds)
        assert writer.wait(5) == 0
        log = p.log()
        # The state write, and perhaps the release of serving_again()'s
        # file, sent after close(2) returned.
        if path == "replay":
            assert left_unanswered(log) >= 1, log
        assert "a write of state that the previous server had taken and not " \
            "answered is refused with EBUSY" in log, log
        assert p.read("suspend_stats/success") == b"0\n"
    finally:
        if writer.poll() is None:
            writer.kill()
        p.stop()


def comm(pid):
    with open(f"/proc/{pid}/comm", "rb") as f:
        return f.read()


def test_every_process_keeps_the_command_name():
    """The server, and the server that becomes the keeper, are executed as
    /proc/self/exe: they must still be "powerfs" for ps, top and pgrep."""
    name = os.path.basename(POWERFS).encode() + b"\n"
    p = Powerfs().start()
    try:
        server = p.server_pid()
        # Named at the start of main(): a server still starting is "exe".
        assert wait_until(lambda: comm(server) == name, timeout=5), comm(server)
        assert comm(p.proc.pid) == name
        pgrep = subprocess.run(["pgrep", "-x", name.strip()],
                               capture_output=True, check=True).stdout
        assert {p.proc.pid, server} <= set(map(int, pgrep.split()))
        os.kill(p.proc.pid, signal.SIGKILL)
        p.proc.wait(5)
        assert wait_until(lambda: children(server), timeout=5), p.log()
        new_server = children(server)[0]
        assert wait_until(lambda: comm(server) == comm(new_server) == name,
                          timeout=5), (comm(server), comm(new_server))
        os.kill(server, signal.SIGTERM)
        assert wait_until(lambda: gone(server) and gone(new_server), timeout=5)
    finally:
        _live.discard(p)
        p.force_cleanup()


def test_a_crash_loop_ends_with_a_clear_error():
    """A server that crashes by itself again and again (here SIGSEGV from
    outside) is not restarted for ever: the keeper gives up, unmounts and
    exits 1."""
    p = Powerfs().start()
    try:
        for i in range(5):
            server = p.server_pid()
            # Under AddressSanitizer the SIGSEGV is caught, reported, and
            # the server ends by SIGABRT (conftest's abort_on_error).
            with open(f"/proc/{server}/maps") as f:
                died_of = ("Aborted" if "libasan" in f.read() else
                           "Segmentation fault")
            os.kill(server, signal.SIGSEGV)
            assert wait_until(lambda: gone(server), timeout=5)
            if i < 4:
                assert serving_again(p) == b"freeze mem disk\n"
        assert p.proc.wait(5) == 1
        assert f"the server died ({died_of}) again and again: " \
            "giving up" in p.log()
        assert not os.path.ismount(p.mnt)
    finally:
        _live.discard(p)
        p.force_cleanup()


def test_a_server_that_cannot_start_leaves_no_mount(tmp_path):
    """An error only the server can find (here: a sysfs backend directory
    it cannot read) ends the start with one line and exit 2, no mount."""
    d = tmp_path / "sys"
    d.mkdir()
    (d / "state").write_text("mem\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([POWERFS, "-f", f"--backend=sysfs:{d}/state/x",
                        str(mnt)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1, r.stderr
    assert not os.path.ismount(mnt)


def test_sigterm_during_the_start_leaves_no_mount(tmp_path):
    """SIGTERM at any moment of the start: no mount stays, no process
    stays."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for delay_ms in range(0, 60, 3):
        a = subprocess.Popen([POWERFS, "-f", str(mnt)],
                             stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(delay_ms / 1000)
        a.send_signal(signal.SIGTERM)
        rc = a.wait(10)
        err = a.stderr.read().decode()
        a.stderr.close()
        # Killed before it could block the signal (no mount yet), or a
        # clean stop.
        assert rc in (0, -signal.SIGTERM), (delay_ms, rc, err)
        assert not os.path.ismount(mnt), (delay_ms, err)
        assert wait_until(lambda: subprocess.run(
            ["pgrep", "-g", str(a.pid)], capture_output=True).returncode
            == 1, timeout=5), f"a process stayed ({delay_ms} ms)"


def test_an_aborted_connection_is_a_failure(tmp_path):
    """echo 1 > /sys/fs/fuse/connections/N/abort: the mount is dead for
    good; powerfs exits non-zero (so Restart=on-failure acts) and says
    why."""
    p = Powerfs().start()
    ctl = tmp_path / "fusectl"
    ctl.mkdir()
    subprocess.run(["mount", "-t", "fusectl", "none", str(ctl)], check=True)
    try:
        conn = os.minor(os.stat(p.mnt).st_dev)
        with open(ctl / str(conn) / "abort", "w") as f:
            f.write("1")
        assert p.proc.wait(5) == 1
        assert "the connection was aborted" in p.log()
    finally:
        subprocess.run(["umount", str(ctl)])
        _live.discard(p)
        p.force_cleanup()


def test_the_fd_store_brings_the_mount_back(tmp_path):
    """Under systemd the connection goes to the service's fd store, and a
    restarted service takes it back (sd_listen_fds(3)).  Here this test
    plays the service manager's part of that protocol: it receives the
    descriptors on $NOTIFY_SOCKET, kills every powerfs process, and starts
    powerfs again with LISTEN_FDS; the mount never dies, the lock
    stays."""
    sock_path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(10)
    mnt = str(tmp_path / "mnt")
    os.mkdir(mnt)
    state = str(tmp_path / "state")
    env = dict(os.environ, NOTIFY_SOCKET=sock_path)
    log = open(tmp_path / "log", "wb")
    argv = [POWERFS, "-f", f"--state-file={state}", mnt]
    a = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True)
    stored = {}
    b = None
    try:
        while True:
            msg, fds, _, _ = socket.recv_fds(sock, 4096, 4)
            fields = msg.decode().split("\n")
            if "READY=1" in fields:
                break
            name = [f[7:] for f in fields if f.startswith("FDNAME=")][0]
            stored[name] = fds[0]
        with open(os.path.join(mnt, "wake_lock"), "w") as f:
            f.write("survivor")
        r = Reader(os.path.join(mnt, "wakeup_count"))
        r.wait_in_read()
        os.killpg(a.pid, signal.SIGKILL)
        a.wait(5)
        # systemd starts the service again with the stored descriptors.
        order = ["powerfs-fuse", "powerfs-session"]
        fds = [stored[n] for n in order]
        wrapper = ("i=3; for fd in $FDS; do eval \"exec $i<&$fd\"; "
                   "i=$((i+1)); done; export LISTEN_PID=$$; exec \"$@\"")
        # bash: dash takes single-digit descriptors only
        b = subprocess.Popen(
            ["bash", "-c", wrapper, "bash", *argv],
            env=dict(env, FDS=" ".join(map(str, fds)), LISTEN_FDS="2",
                     LISTEN_FDNAMES=":".join(order)),
            pass_fds=fds, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True)
        # In a child with a deadline: if the new server failed to start, an
        # open would wait for it forever.
        got = subprocess.run(["cat", os.path.join(mnt, "wake_lock")],
                             capture_output=True, timeout=10)
        assert got.stdout == b"survivor\n", (got, open(tmp_path / "log").read())
        assert r.blocked(0.05)
        with open(os.path.join(mnt, "wake_unlock"), "w") as f:
            f.write("survivor")
        n, err, data = r.result(5)
        assert err == 0 and data.strip().isdigit(), (n, err, data)
        text = open(tmp_path / "log").read()
        assert "taking the connection back from the service manager" in text
        r.kill()
        dev = os.stat(mnt).st_dev
        assert subprocess.run([FUSERMOUNT, "-u", mnt]).returncode == 0
        assert conftest.wait_end_after_unmount(
            dev, lambda: b.poll() is not None,
            lambda: b.send_signal(signal.SIGTERM))
        assert b.wait() == 0
    finally:
        for fd in stored.values():
            os.close(fd)
        for proc in (a, b):
            if proc and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run([FUSERMOUNT, "-uz", mnt], capture_output=True)
        sock.close()
        log.close()


def test_a_dead_keepers_state_file_is_not_a_new_keepers(tmp_path):
    """Without --state-file a keeper keeps its state in /run/powerfs/PID.state.
    One killed by SIGKILL leaves that file; a new keeper that gets the same
    pid starts clean, not with the dead one's locks.  (In a pid namespace of
    its own the keeper is pid 1, so the pid is known.)"""
    if not os.access("/run", os.W_OK):
        pytest.skip("the own state file would not be under /run/powerfs")
    os.makedirs("/run/powerfs", mode=0o700, exist_ok=True)
    stale = "/run/powerfs/1.state"
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    with open(stale, "w") as f:
        f.write(f"powerfs-state 2 {boot}\n"
                "lock 7374616c65 1 1 1 0 0 0 0 0 1 0 0 0\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen(["unshare", "--pid", "--fork",
                          POWERFS, "-f", str(mnt)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: os.path.ismount(mnt),
                          timeout=conftest.MOUNT_TIMEOUT)
        with open(mnt / "wake_lock", "rb") as f:
            assert f.read() == b"\n"
    finally:
        subprocess.run([FUSERMOUNT, "-u", str(mnt)], capture_output=True,
                       timeout=10)
        try:
            p.wait(conftest.EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            subprocess.run([FUSERMOUNT, "-uz", str(mnt)], capture_output=True)
        p.stdout.close()
        if os.path.exists(stale):
            os.unlink(stale)
