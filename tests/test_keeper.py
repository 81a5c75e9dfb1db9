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

import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
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


# How each server took the connection over, as it logs it: "resend" (the
# kernel sent again what the dead server had read and not answered:
# FUSE_NOTIFY_RESEND, Linux 6.9 and later) or "replay" (older kernels, and
# POWERFS_NO_RESEND: the server processed its predecessor's kept copies
# again).  The kernel decides, so tests assert on what was logged.
def paths_taken(log):
    return re.findall(r": taken over \(path: (resend|replay)\)", log)


def path_of_kernel(log):
    """The path the first server found the kernel offers."""
    found = re.findall(r": path: (resend|replay) ", log)
    assert found, log
    return found[0]


def mode(log):
    path = set(paths_taken(log))
    return {"resend": " (sent again by the kernel)",
            "replay": " (processed again from kept copies)"}.get(
                path.pop() if len(path) == 1 else "", " (mixed paths!)")


def report(capsys, line):
    with capsys.disabled():
        print(f"\n  {line}")


# "replay": the path of kernels before 6.9 (Debian 12's 6.1), which cannot
# send a server's unanswered requests to the next one (FUSE_NOTIFY_RESEND):
# the next server processes them again from the copies kept in the session
# file (inflight.c).  POWERFS_NO_RESEND makes powerfs take that path on any
# kernel; "kernel" lets the kernel decide (resend on 6.9 and later, replay
# before).
@pytest.fixture(params=["kernel", "replay"])
def powerfs(request, monkeypatch):
    if request.param == "replay":
        monkeypatch.setenv("POWERFS_NO_RESEND", "1")
    p = Powerfs().start()
    p.forced_replay = request.param == "replay"
    yield p
    p.stop()


def check_paths(p, take_overs, log):
    """Every take-over took the path the first server found, replay if
    forced; on the replay path each processed again what it was left (the
    blocked readers at least)."""
    path = "replay" if p.forced_replay else path_of_kernel(log)
    assert paths_taken(log) == [path] * take_overs, log
    left = [int(n) for n in re.findall(
        r"taken over \(path: replay\): the previous server left (\d+) "
        r"requests? unanswered", log)]
    if path == "replay":
        assert len(left) == take_overs and min(left) >= 3, left
    else:
        assert left == []


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
    check_paths(p, 100, p.log())
    report(capsys, figures("kill -9 of the server" + mode(p.log()), gaps) +
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
    check_paths(p, 10, log)
    report(capsys, figures("SIGHUP upgrade" + mode(log), gaps))


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
    """How many requests the last server found left by its predecessor,
    on the replay path."""
    found = re.findall(r"taken over \(path: replay\): the previous server "
                       r"left (\d+) requests? unanswered", log)
    return int(found[-1]) if found else 0


def kill_server_and_wait(p):
    server = p.server_pid()
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: gone(server), timeout=5)
    assert serving_again(p) == b"freeze mem disk\n"


@pytest.mark.parametrize("path", ["kernel", "replay"])
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
        if paths_taken(p.log()) == ["replay"]:
            assert left_unanswered(p.log()) >= 2, p.log()
        else:
            assert paths_taken(p.log()) == ["resend"] and path == "kernel"
        for r in readers:
            assert r.blocked(0.05)
        p.unlock("held")
        count = p.count()
        for r in readers:
            assert r.result(5) == (len(b"%d\n" % count), 0, b"%d\n" % count)
            r.kill()
    finally:
        p.stop()


@pytest.mark.parametrize("path", ["kernel", "replay"])
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
        # The server took the write and is suspending for it (under
        # emulation the kernel may still hold it when its writer waits).
        assert wait_until(lambda: "suspending to mem" in p.log(),
                          timeout=10), p.log()
        assert serving_again(p) == b"freeze mem disk\n"
        kill_server_and_wait(p)
        result, seconds = writer.stdout.readline().split()
        assert result == "EBUSY" and float(seconds) < 10, (result, seconds)
        assert writer.wait(5) == 0
        log = p.log()
        # The state write, and perhaps the release of serving_again()'s
        # file, sent after close(2) returned.
        if paths_taken(log) == ["replay"]:
            assert left_unanswered(log) >= 1, log
        else:
            assert paths_taken(log) == ["resend"] and path == "kernel"
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


# --- signals at the worst moments --------------------------------------------
#
# An upgrade (SIGHUP to the keeper) or a kill -9 can come at any moment:
# while a server starts, before it can handle the signal the keeper sends
# it, while the keeper that an upgrade executed has not yet seen its first
# server serve.  The mount must stay, serving, with its locks.

def mount_works(p, lock=b"kept", timeout=15):
    """The mount answers and lists lock (None: any): read in a child with a
    deadline (a mount nobody serves would block the test itself)."""
    try:
        r = subprocess.run(["cat", p.path("wake_lock")], capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0 and (lock is None or lock in r.stdout.split())


def new_server(p, old, timeout=10):
    """The keeper's server once it is not old (pid), or None."""
    found = []
    wait_until(lambda: found.extend(x for x in children(p.proc.pid)
                                    if x != old and not gone(x)) or found,
               timeout=timeout, interval=0.0005)
    return found[0] if found else None


def settled(p, lock=b"kept", timeout=15):
    """No upgrade or restart under way: one server, serving (with lock)."""
    return wait_until(lambda: len(children(p.proc.pid)) == 1 and
                      mount_works(p, lock, timeout=timeout), timeout=timeout)


class Notices:
    """A service manager's $NOTIFY_SOCKET: collects what powerfs says
    (descriptors sent for the fd store are closed at once)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setblocking(False)
        self.path = path
        self.said = []

    def poll(self):
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(self.sock, 4096, 8)
            except BlockingIOError:
                return self.said
            for fd in fds:
                os.close(fd)
            self.said += [x for x in msg.decode().split("\n")
                          if x in ("READY=1", "RELOADING=1", "STOPPING=1")]

    def ready_after_last_reload(self):
        said = self.poll()
        return "RELOADING=1" in said and said[-1] == "READY=1"

    def close(self):
        self.sock.close()


@pytest.mark.timeout(120)
def test_two_upgrades_at_any_spacing():
    """Two SIGHUPs 0 to 100 ms apart, on a mount that holds a lock: each
    pair ends in upgrades (the keeper executes itself, keeping its pid),
    the mount serves with its lock, and the keeper never gives up."""
    p = Powerfs().start()
    try:
        p.lock("kept")
        keeper = p.proc.pid
        for gap_ms in (0, 1, 2, 3, 5, 8, 12, 20, 35, 50, 100):
            server = p.server_pid()
            upgrades = p.log().count("taking the connection over from the "
                                     "previous keeper")
            os.kill(keeper, signal.SIGHUP)
            time.sleep(gap_ms / 1000)
            os.kill(keeper, signal.SIGHUP)
            assert wait_until(lambda: gone(server), timeout=10), gap_ms
            assert settled(p), (gap_ms, p.log()[-3000:])
            assert p.alive() and p.proc.pid == keeper, p.log()[-3000:]
            assert p.log().count("taking the connection over from the "
                                 "previous keeper") > upgrades, gap_ms
        assert "giving up" not in p.log()
    finally:
        p.stop()


@pytest.mark.timeout(120)
def test_upgrades_right_after_the_start():
    """SIGHUPs from the moment the mount appears, while the first server
    is still starting: the upgrade happens, the mount stays."""
    for delay_ms in (0, 1, 2, 4, 7, 11, 16, 25, 40):
        p = Powerfs().start()
        try:
            time.sleep(delay_ms / 1000)
            os.kill(p.proc.pid, signal.SIGHUP)
            os.kill(p.proc.pid, signal.SIGHUP)
            assert settled(p, lock=None), (delay_ms, p.log())
            assert wait_until(lambda: "taking the connection over from the "
                              "previous keeper" in p.log()), p.log()
            p.lock("kept")
            assert mount_works(p)
            p.unlock("kept")
        finally:
            p.stop()


@pytest.mark.timeout(120)
def test_an_upgrade_at_any_moment_after_a_kill():
    """kill -9 of the server, then SIGHUP 0 to 50 ms later, while the next
    server starts: the upgrade is not lost (the keeper executes itself),
    the mount serves with its lock."""
    p = Powerfs().start()
    try:
        p.lock("kept")
        keeper = p.proc.pid
        for gap_ms in (0, 1, 2, 3, 5, 8, 12, 20, 35, 50):
            server = p.server_pid()
            upgrades = p.log().count("taking the connection over from the "
                                     "previous keeper")
            os.kill(server, signal.SIGKILL)
            time.sleep(gap_ms / 1000)
            os.kill(keeper, signal.SIGHUP)
            assert wait_until(lambda: gone(server), timeout=10)
            assert settled(p), (gap_ms, p.log()[-3000:])
            assert p.alive() and p.proc.pid == keeper
            assert wait_until(lambda: p.log().count(
                "taking the connection over from the previous keeper")
                > upgrades), (gap_ms, p.log()[-3000:])
        assert "giving up" not in p.log()
    finally:
        p.stop()


@pytest.mark.timeout(120)
def test_a_kill_of_the_new_server_right_after_an_upgrade():
    """SIGHUP, then kill -9 of the server the upgraded keeper starts, 0 to
    15 ms after it appears: that keeper has not seen a server serve yet,
    but the mount has, so it starts another rather than give up."""
    p = Powerfs().start()
    try:
        p.lock("kept")
        for delay_ms in (0, 1, 2, 4, 7, 10, 15):
            server = p.server_pid()
            os.kill(p.proc.pid, signal.SIGHUP)
            fresh = new_server(p, server)
            assert fresh, p.log()[-3000:]
            time.sleep(delay_ms / 1000)
            os.kill(fresh, signal.SIGKILL)
            assert settled(p), (delay_ms, p.log()[-3000:])
            assert p.alive()
        assert "giving up" not in p.log()
    finally:
        p.stop()


@pytest.mark.timeout(120)
def test_ready_follows_every_reloading(tmp_path):
    """Under systemd (Type=notify, ExecReload=kill -HUP) every RELOADING=1
    is followed by READY=1 once a server serves again, whatever happens in
    between: two SIGHUPs, a kill -9 before the SIGHUP, a kill -9 of the new
    server."""
    notices = Notices(str(tmp_path / "notify"))
    p = Powerfs(env=dict(os.environ, NOTIFY_SOCKET=notices.path)).start()
    try:
        assert wait_until(lambda: "READY=1" in notices.poll(), timeout=10)
        p.lock("kept")

        def hup():
            os.kill(p.proc.pid, signal.SIGHUP)

        def hup_hup():
            hup()
            time.sleep(0.002)
            hup()

        def kill_hup():
            os.kill(p.server_pid(), signal.SIGKILL)
            time.sleep(0.002)
            hup()

        def hup_kill():
            server = p.server_pid()
            hup()
            fresh = new_server(p, server)
            if fresh:
                os.kill(fresh, signal.SIGKILL)

        for what in (hup, hup_hup, kill_hup, hup_kill):
            before = len(notices.poll())
            what()
            assert wait_until(lambda: notices.ready_after_last_reload() and
                              len(notices.poll()) > before, timeout=15), \
                (what.__name__, notices.poll(), p.log()[-3000:])
            assert settled(p), (what.__name__, p.log()[-3000:])
    finally:
        p.stop()
        notices.close()


# --- failures of the system the keeper depends on ---------------------------

@pytest.fixture(scope="module")
def fault_preload(tmp_path_factory):
    """tests/fault-preload.c built as a library for LD_PRELOAD."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build tests/fault-preload.c")
    out = str(tmp_path_factory.mktemp("fault") / "fault-preload.so")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", out,
                    str(conftest.REPO / "tests" / "fault-preload.c"), "-ldl"],
                   check=True)
    return out


def faulty_env(preload, **faults):
    env = dict(os.environ, LD_PRELOAD=preload, **faults)
    # A sanitized powerfs wants its runtime first in the library list.
    env["ASAN_OPTIONS"] = ":".join(x for x in (
        env.get("ASAN_OPTIONS"), "verify_asan_link_order=0") if x)
    return env


def test_a_fork_failure_at_the_start_leaves_no_mount(tmp_path, fault_preload):
    """The keeper mounts, then cannot start a server (fork fails): it
    unmounts and exits 1 with one line of explanation, no dead mount."""
    block = tmp_path / "no-fork"
    block.touch()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([POWERFS, "-f", str(mnt)], capture_output=True,
                       text=True, timeout=20,
                       env=faulty_env(fault_preload,
                                      PF_FAULT_FORK=str(block)))
    try:
        assert r.returncode == 1, r
        assert "cannot start a server" in r.stderr, r.stderr
        assert not os.path.ismount(mnt)
    finally:
        subprocess.run([FUSERMOUNT, "-uz", str(mnt)], capture_output=True)


@pytest.mark.timeout(60)
def test_a_fork_failure_after_a_crash_is_retried(tmp_path, fault_preload):
    """The server dies while fork fails: the keeper keeps the mount and
    tries again until a server starts; clients wait, the lock stays."""
    block = tmp_path / "no-fork"
    p = Powerfs(env=faulty_env(fault_preload,
                               PF_FAULT_FORK=str(block))).start()
    try:
        p.lock("kept")
        block.touch()
        server = p.server_pid()
        os.kill(server, signal.SIGKILL)
        assert wait_until(lambda: "cannot start a server" in p.log(),
                          timeout=10), p.log()
        time.sleep(0.5)         # still no server, and a keeper, after 0.5 s
        assert p.alive() and not children(p.proc.pid), p.log()
        block.unlink()
        assert settled(p), p.log()
    finally:
        if block.exists():
            block.unlink()
        p.stop()


@pytest.mark.timeout(60)
def test_the_keeper_works_without_signalfd(fault_preload):
    """signalfd(2) fails (ENOMEM): the keeper still restarts a killed
    server, upgrades on SIGHUP and stops on SIGTERM."""
    p = Powerfs(env=faulty_env(fault_preload, PF_FAULT_SIGNALFD="1")).start()
    try:
        p.lock("kept")
        server = p.server_pid()
        os.kill(server, signal.SIGKILL)
        assert wait_until(lambda: gone(server))
        assert settled(p), p.log()
        server = p.server_pid()
        os.kill(p.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: gone(server))
        assert settled(p), p.log()
        assert "taking the connection over from the previous keeper" \
            in p.log()
        p.unlock("kept")
        os.kill(p.proc.pid, signal.SIGTERM)
        assert p.proc.wait(10) == 0, p.log()
        assert not os.path.ismount(p.mnt)
    finally:
        _live.discard(p)
        p.force_cleanup()


def test_a_keeper_that_fails_leaves_no_state_file():
    """A keeper that keeps its own state file (no --state-file) removes it,
    and a half-written .tmp beside it, however it ends: here a crash loop,
    exit status 1."""
    if not os.access("/run", os.W_OK):
        pytest.skip("the own state file would not be under /run/powerfs")
    p = Powerfs().start()
    path = f"/run/powerfs/{p.proc.pid}.state"
    try:
        assert wait_until(lambda: os.path.exists(path)), p.log()
        for i in range(5):
            server = p.server_pid()
            if i == 4:
                # As a server killed while it compacts the file leaves it.
                open(path + ".tmp", "w").close()
            os.kill(server, signal.SIGSEGV)
            assert wait_until(lambda: gone(server), timeout=5)
            if i < 4:
                assert serving_again(p) == b"freeze mem disk\n"
        assert p.proc.wait(10) == 1
        assert not os.path.exists(path)
        assert not os.path.exists(path + ".tmp")
    finally:
        _live.discard(p)
        p.force_cleanup()
        for f in (path, path + ".tmp"):
            if os.path.exists(f):
                os.unlink(f)


# --- every waiting request survives -------------------------------------------

# Run as another user: THREADS threads each open wakeup_count and block in
# read(2); prints "started" once each thread is about to read, "done N" once
# every read returned (N: how many returned the count), "error ..." if one
# failed.
_PARKER = r'''
import os, resource, sys, threading
path, n = sys.argv[1], int(sys.argv[2])
# A descriptor each: more than the usual soft limit of 1024.
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, n + 64))
os.setgid(1000)
os.setuid(1000)
threading.stack_size(128 * 1024)
results = []
lock = threading.Lock()
def read():
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.read(fd, 64)
    except OSError as e:
        data = ("error %d" % e.errno).encode()
    finally:
        os.close(fd)
    with lock:
        results.append(data)
        if len(results) == n:
            bad = [x for x in results if not x.strip().isdigit()]
            print("done", n - len(bad), *set(bad), flush=True)
threads = [threading.Thread(target=read, daemon=True) for _ in range(n)]
for t in threads:
    t.start()
print("started", flush=True)
for t in threads:
    t.join()
'''


def threads_in_read(pid):
    """How many threads of pid sit in read(2)."""
    nums = conftest._READ_SYSCALLS.get(conftest.platform.machine(), ("0",))
    n = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                n += f.read().split(" ", 1)[0] in nums
        except OSError:
            pass
    return n


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", ["kernel", "replay"])
def test_1100_parked_reads_of_one_user_then_a_crash(monkeypatch, path):
    """Root holds a lock; uid 1000 parks 1,100 wakeup_count reads (mode
    0644), and root's own reader then blocks too.  A kill -9 of the server,
    then an upgrade: once the lock goes every read returns the count, root's
    included.  (A record of 1,024 requests left the rest, and root's read,
    unanswered for ever on kernels before 6.9.)"""
    if path == "replay":
        monkeypatch.setenv("POWERFS_NO_RESEND", "1")
    n = 1100
    p = Powerfs("-o", "allow_other").start()
    parker = None
    try:
        p.lock("held")
        parker = Lines([PYTHON, "-c", _PARKER, p.path("wakeup_count"),
                        str(n)])
        assert wait_until(lambda: "started" in parker.poll(),
                          timeout=60), parker.poll()
        assert wait_until(lambda: threads_in_read(parker.proc.pid) >= n,
                          timeout=60), threads_in_read(parker.proc.pid)
        root = Reader(p.path("wakeup_count"))
        root.wait_in_read()
        # Served in order: once this is answered, every read above was
        # read by the server.
        assert serving_again(p) == b"freeze mem disk\n"
        kill_server_and_wait(p)
        server = p.server_pid()
        os.kill(p.proc.pid, signal.SIGHUP)
        assert wait_until(lambda: gone(server), timeout=10)
        assert serving_again(p) == b"freeze mem disk\n"
        assert root.blocked(0.05)
        p.unlock("held")
        count = p.count()
        assert root.result(20) == (len(b"%d\n" % count), 0, b"%d\n" % count)
        assert wait_until(lambda: any(x.startswith("done")
                                      for x in parker.poll()),
                          timeout=60), parker.poll()[-3:]
        assert f"done {n}" in parker.poll(), parker.poll()[-3:]
        root.kill()
    finally:
        if parker:
            parker.kill()
        p.stop()


# --- page size ---------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", ["kernel", "replay"])
def test_a_kernel_with_16k_pages(monkeypatch, fault_preload, path):
    """libfuse and powerfs told the page is 16 KiB (Raspberry Pi 5, Asahi,
    Android's 16 KiB devices): libfuse alone would ask the kernel for writes
    of 256 such pages, and every read of a smaller buffer after INIT fails.
    powerfs negotiates writes of two pages and sizes its read buffers from
    the page size: locks, a write longer than a page (cut to its first 4096
    bytes), and a blocked reader across a kill all work."""
    if path == "replay":
        monkeypatch.setenv("POWERFS_NO_RESEND", "1")
    p = Powerfs(env=faulty_env(fault_preload,
                               PF_FAULT_PAGESIZE="16384")).start()
    try:
        assert mount_works(p, lock=None), p.log()
        p.lock("big")
        assert p.write("wake_lock", b"x" * 40000) == 4096
        # The lock named by the first 4096 bytes exists: unlocking it
        # (a write taken whole) succeeds.
        p.unlock("x" * 4096)
        assert p.active() == [b"big"]
        r = Reader(p.path("wakeup_count"))
        r.wait_in_read()
        assert serving_again(p) == b"freeze mem disk\n"
        kill_server_and_wait(p)
        assert r.blocked(0.05)
        p.unlock("big")
        count = p.count()
        assert r.result(10)[:2] == (len(b"%d\n" % count), 0)
        r.kill()
    finally:
        p.stop()


# --- the stress of issue 24, short ---------------------------------------------

@pytest.mark.timeout(240)
@pytest.mark.parametrize("path", ["kernel", "replay"])
def test_kill_and_upgrade_stress(path, capsys):
    """scripts/crash-stress, short: 100 kill -9 and 10 upgrades of servers
    living 30 to 100 ms, under a client that alternates a lock and an
    unlock of one name and checks the list after each acknowledged write,
    with two readers parked throughout.  Nothing lost, nothing reordered,
    no error, no hang (the script's own verdict)."""
    script = str(conftest.REPO / "scripts" / "crash-stress")
    args = [script, "--kills=100", "--upgrades=10", "--quiet", POWERFS]
    if path == "replay":
        args.append("--path=replay")
    r = subprocess.run(args, capture_output=True, text=True, timeout=230)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    verdict = [x for x in out.splitlines() if x.startswith("crash-stress: ")]
    assert verdict and verdict[-1].startswith("crash-stress: PASS: 100 kills, "
                                             "10 upgrades, "), out[-6000:]
    report(capsys, verdict[-1] + "; " + [x for x in out.splitlines()
                                         if x.startswith("path: ")][0])
