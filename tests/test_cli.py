"""The command line: --help, --version, errors (exit 2), background mode,
SIGTERM."""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import conftest

from conftest import (BAD_LOG_PATTERNS, FUSERMOUNT, POWERFS, REPO, Powerfs,
                      _live, wait_until)

OPTIONS = ["--foreground", "--debug", "-o", "--backend", "--simulate-sleep-ms",
           "--simulate-states", "--wakelock-limit", "--wakelock-gc-seconds",
           "--no-capability-check", "--trust-userns-owner", "--owner",
           "--metrics-dir", "--version", "--help"]


def run(*args, timeout=10):
    return subprocess.run([POWERFS, *args], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=timeout)


@pytest.fixture
def tmpdir_():
    d = tempfile.mkdtemp(prefix="powerfs-cli-")
    yield d
    # Whatever a failed test left behind: a (possibly dead) mount, a daemon.
    mnt = os.path.join(d, "mnt")
    subprocess.run([FUSERMOUNT, "-uz", mnt], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    for pid in conftest.powerfs_pids(mnt):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(d, ignore_errors=True)


def version():
    m = re.search(r"^VERSION\s*:?=\s*(\S+)", (REPO / "Makefile").read_text(),
                  re.M)
    return m.group(1) if m else None


def test_help():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    for opt in OPTIONS:
        assert opt in out, f"--help does not mention {opt}"
    assert "MOUNTPOINT" in out.upper()


def test_version():
    r = run("--version")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    v = version()
    assert v and v in out, f"--version printed {out!r}, Makefile says {v}"


def one_line(stderr):
    text = stderr.decode(errors="replace")
    return text.strip() != "" and text.rstrip("\n").count("\n") == 0


@pytest.mark.parametrize("args", [
    ["--bogus"], ["-z"], ["--backend=nonsense"], ["--wakelock-limit=abc"],
    ["--wakelock-gc-seconds=x"], ["--simulate-sleep-ms=abc"],
    ["--simulate-states=sleepy"], ["--owner=root:root"], ["--owner=100000"],
    ["--owner=1:2:3"], ["--owner=-1:0"], ["--owner=4294967295:0"],
    ["--trust-userns-owner=abc"], ["--trust-userns-owner=-1"],
    ["--trust-userns-owner=1000", "--trust-userns-owner=1x"],
    ["--trust-userns-owner=4294967295"], ["--trust-userns-owner="],
    ["--no-capability-check", "--trust-userns-owner=1000"],
], ids=lambda a: " ".join(a))
def test_bad_option(tmpdir_, args):
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    r = run("-f", *args, mnt)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert one_line(r.stderr), f"not a one-line error: {r.stderr!r}"
    assert not os.path.ismount(mnt)


@pytest.mark.parametrize("case", ["missing", "nonexistent", "regular_file",
                                  "two"])
def test_unusable_mount_point(tmpdir_, case):
    mnt = os.path.join(tmpdir_, "mnt")
    if case == "missing":
        args = []
    elif case == "nonexistent":
        args = [os.path.join(tmpdir_, "does", "not", "exist")]
    elif case == "regular_file":
        with open(mnt, "w"):
            pass
        args = [mnt]
    else:
        os.mkdir(mnt)
        os.mkdir(mnt + "2")
        args = [mnt, mnt + "2"]
    try:
        r = run("-f", *args, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("powerfs kept running with an unusable mount point")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert one_line(r.stderr), f"not a one-line error: {r.stderr!r}"
    assert not os.path.ismount(mnt)


def parent_pid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_background_mode(tmpdir_):
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    log = os.path.join(tmpdir_, "log")
    with open(log, "wb") as f:
        r = subprocess.run([POWERFS, "--simulate-sleep-ms=10", mnt],
                           stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                           timeout=10)
    assert r.returncode == 0, open(log).read()
    assert os.path.ismount(mnt), "not mounted when the command returned"
    with open(os.path.join(mnt, "state"), "rb") as f:
        assert f.read() == b"freeze mem disk\n"
    # Two processes: the keeper holding the mount, its child serving it.
    pids = conftest.powerfs_pids(mnt)
    assert len(pids) == 2, pids
    parents = {pid: parent_pid(pid) for pid in pids}
    keeper = [pid for pid in pids if parents[pid] not in pids]
    server = [pid for pid in pids if parents[pid] in pids]
    assert len(keeper) == 1 and len(server) == 1, parents
    assert parents[keeper[0]] != os.getpid(), "the keeper did not detach"
    dev = os.stat(mnt).st_dev
    u = subprocess.run([FUSERMOUNT, "-u", mnt], capture_output=True)
    assert u.returncode == 0, u.stderr
    assert conftest.wait_end_after_unmount(
        dev, lambda: not any(os.path.exists(f"/proc/{p}") for p in pids),
        lambda: os.kill(keeper[0], signal.SIGTERM)), \
        "daemon still running after unmount"
    # (tmpdir_ cleans up after a failure.)


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_signal_in_foreground_unmounts_and_exits_0(sig):
    p = Powerfs().start()
    try:
        assert p.read("state") == b"freeze mem disk\n"
        os.kill(p.proc.pid, sig)
        rc = p.proc.wait(5)
        assert rc == 0, f"exit status {rc}; output:\n{p.log()}"
        assert not os.path.ismount(p.mnt)
        bad = [line for line in p.log().splitlines()
               if any(x in line for x in BAD_LOG_PATTERNS)]
        assert not bad, bad
    finally:
        _live.discard(p)
        p.force_cleanup()
        shutil.rmtree(p.tmpdir, ignore_errors=True)


def test_sigterm_with_a_lock_held():
    p = Powerfs().start()
    try:
        p.lock("held")
        os.kill(p.proc.pid, signal.SIGTERM)
        assert p.proc.wait(5) == 0
        assert not os.path.ismount(p.mnt)
    finally:
        _live.discard(p)
        p.force_cleanup()
        shutil.rmtree(p.tmpdir, ignore_errors=True)


def test_debug_option(mount):
    """-d logs every write, with its text, writer and result."""
    p = mount("-d")
    assert p.read("state") == b"freeze mem disk\n"
    p.lock("dbg")
    p.unlock("dbg")
    pid = os.getpid()
    for name in ("wake_lock", "wake_unlock"):
        line = f'write {name} "dbg" by pid {pid} uid 0: ok'
        assert wait_until(lambda: line in p.log()), (line, p.log())


def test_explicit_simulate_backend(mount):
    p = mount("--backend=simulate")
    assert p.read("state") == b"freeze mem disk\n"


def test_long_foreground_option(tmpdir_):
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    proc = subprocess.Popen([POWERFS, "--foreground", mnt],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: os.path.ismount(mnt) or
                          proc.poll() is not None, timeout=5)
        assert os.path.ismount(mnt)
        assert proc.poll() is None, "--foreground did not stay in the foreground"
        dev = os.stat(mnt).st_dev
        assert subprocess.run([FUSERMOUNT, "-u", mnt]).returncode == 0
        assert conftest.wait_end_after_unmount(
            dev, lambda: proc.poll() is not None,
            lambda: proc.send_signal(signal.SIGTERM))
        assert proc.wait() == 0
    finally:
        if os.path.ismount(mnt):
            subprocess.run([FUSERMOUNT, "-uz", mnt])
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_owner_gives_the_writable_files(mount):
    """--owner=UID:GID: the files that take writes belong to UID:GID from
    the start (an unprivileged container's root); the read-only ones stay
    root's."""
    p = mount("--owner=100000:100001")
    writable = set(conftest.ROOT_FILES)
    for name in sorted(os.listdir(p.path())):
        st = os.stat(p.path(name))
        want = (100000, 100001) if name in writable else (0, 0)
        assert (st.st_uid, st.st_gid) == want, name
    for name in os.listdir(p.path("suspend_stats")):
        st = os.stat(p.path("suspend_stats/" + name))
        assert (st.st_uid, st.st_gid) == (0, 0), name


def test_a_dead_mount_is_replaced_even_with_cached_attributes(tmpdir_):
    """kill -9 leaves a dead mount; the kernel may still answer stat() from
    cached attributes.  The next powerfs lifts it (statfs asks the server)
    instead of stacking on it, so nothing dead comes back after a clean
    stop."""
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    a = subprocess.Popen([POWERFS, "-f", mnt], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    assert wait_until(lambda: os.path.ismount(mnt), timeout=5)
    os.stat(os.path.join(mnt, "state"))     # attributes cached for an hour
    # Keeper and server both: nothing holds the connection any more.
    os.killpg(a.pid, signal.SIGKILL)
    a.wait(conftest.EXIT_TIMEOUT)
    assert wait_until(lambda: not conftest.children(a.pid) and
                      not os.path.exists(f"/proc/{a.pid}"),
                      timeout=conftest.EXIT_TIMEOUT)
    b = subprocess.Popen([POWERFS, "-f", mnt], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        if not wait_until(lambda: open_ok(mnt) or b.poll() is not None,
                          timeout=conftest.MOUNT_TIMEOUT) or not open_ok(mnt):
            if b.poll() is None:
                b.kill()
            b.wait(conftest.EXIT_TIMEOUT)
            raise AssertionError(
                f"the new mount does not answer (status {b.returncode}, "
                f"mounts: {mounts_at(mnt)}): {b.stdout.read().decode()}")
        dev = os.stat(mnt).st_dev
        r = subprocess.run([FUSERMOUNT, "-u", mnt], capture_output=True,
                           timeout=10)
        assert r.returncode == 0, r.stderr
        assert conftest.wait_end_after_unmount(
            dev, lambda: b.poll() is not None,
            lambda: b.send_signal(signal.SIGTERM))
        assert b.wait() == 0
        out = b.stdout.read().decode()
        assert "removing a stale mount" in out, out
        assert not os.path.ismount(mnt), "a dead mount came back"
        assert os.listdir(mnt) == []
    finally:
        if b.poll() is None:
            b.kill()
            b.wait(conftest.EXIT_TIMEOUT)
        b.stdout.close()


def mounts_at(mnt):
    with open("/proc/self/mountinfo") as f:
        return [line.split(" - ")[1].strip() for line in f
                if line.split()[4] == mnt]


def open_ok(mnt):
    try:
        with open(os.path.join(mnt, "state"), "rb") as f:
            return f.read() == b"freeze mem disk\n"
    except OSError:
        return False


@pytest.mark.parametrize("where", ["missing-dir", "inside-mount", "fifo",
                                   "dir"])
def test_unusable_state_file_is_refused_at_start(tmpdir_, where):
    """A state file that could never be written, or whose use would
    deadlock the start (inside the mount, a FIFO), is an error at start:
    exit 2 and one line, no mount."""
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    path = {"missing-dir": os.path.join(tmpdir_, "no-such-dir", "state"),
            "inside-mount": os.path.join(mnt, "state"),
            "fifo": os.path.join(tmpdir_, "fifo"),
            "dir": tmpdir_}[where]
    if where == "fifo":
        os.mkfifo(path)
    r = run("-f", f"--state-file={path}", mnt, timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert one_line(r.stderr), r.stderr
    assert r.stderr.startswith(b"powerfs: --state-file: "), r.stderr
    assert not os.path.ismount(mnt)


def test_repeated_log_lines_are_limited(mount):
    """Autosleep with a writer churning locks made two lines per cycle,
    about 1,500 lines/s.  Each call site now logs a burst, then one line
    per 10 s, and says how many it dropped."""
    p = mount("--simulate-sleep-ms=10")
    assert p.write("autosleep", b"mem") == 3
    fd_l = os.open(p.path("wake_lock"), os.O_WRONLY)
    fd_u = os.open(p.path("wake_unlock"), os.O_WRONLY)
    try:
        t0 = time.monotonic()
        pairs = 0
        while time.monotonic() - t0 < 3:
            os.write(fd_l, b"churn")
            os.write(fd_u, b"churn")
            pairs += 1
            time.sleep(0.001)   # a steady churn, on purpose
    finally:
        os.close(fd_l)
        os.close(fd_u)
    assert p.write("autosleep", b"off") == 3
    attempts = p.stat("success") + p.stat("fail")
    p.stop()                    # at exit it says what it did not log
    p.stop = lambda: None
    lines = [l for l in p.log().splitlines() if "suspend" in l or
             "resumed" in l]
    assert attempts > 100, attempts
    # Three call sites (suspending, resumed, aborted), each: a burst of 10,
    # a line per 10 s, and what it dropped, said at exit.
    assert len(lines) <= 3 * 12, len(lines)
    assert any("more like it, not logged" in l for l in lines), lines


# --- what a newcomer met ------------------------------------------------------------

@pytest.mark.parametrize("env", [{"LANG": "C", "LC_ALL": "C"},
                                 {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}])
def test_help_usage_line_is_plain(env):
    """GLib prints "[OPTION…]", which an ASCII locale turned into
    "[OPTION?]"."""
    r = subprocess.run([POWERFS, "--help"], capture_output=True, timeout=10,
                       env=dict(os.environ, **env))
    assert r.stdout.decode().splitlines()[1] == \
        "  powerfs [OPTION...] MOUNTPOINT"


def test_a_second_powerfs_on_the_same_mount_point_is_refused(tmpdir_):
    """Stacking would hide the first one's locks behind a second daemon."""
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    first = Powerfs()
    os.rmdir(first.mnt)
    first.mnt = mnt
    first.start()
    try:
        first.lock("first")
        r = run("-f", mnt)
        assert r.returncode == 2, r.stderr
        assert r.stderr.decode() == (
            f"powerfs: cannot mount on {mnt}: a powerfs serves it already "
            f"(unmount it first: fusermount3 -u {mnt})\n")
        with open("/proc/self/mountinfo") as f:
            assert sum(f" {mnt} " in line for line in f) == 1
        assert first.active() == [b"first"]
        first.unlock("first")
    finally:
        first.stop()


@pytest.mark.parametrize("args,message", [
    (["-o", "bogus"], 'powerfs: bad mount options "default_permissions,'
     'fsname=powerfs,subtype=powerfs,bogus": fuse: unknown option(s): '
     "`-o bogus'\n"),
    (["--backend=sysfs"], "powerfs: --backend=sysfs needs the directory to "
     "write the state to: --backend=sysfs:DIR\n"),
    (["--backend=nonsense"], 'powerfs: unknown backend "nonsense" '
     "(simulate, logind or sysfs:DIR)\n"),
], ids=["mount option", "sysfs without DIR", "unknown backend"])
def test_error_messages_say_what_to_do(tmpdir_, args, message):
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    r = run("-f", *args, mnt)
    assert (r.returncode, r.stderr.decode()) == (2, message)


def test_logind_without_a_system_bus_names_both(tmpdir_):
    mnt = os.path.join(tmpdir_, "mnt")
    os.mkdir(mnt)
    r = subprocess.run([POWERFS, "-f", "--backend=logind", mnt],
                       capture_output=True, timeout=10,
                       env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=
                                f"unix:path={tmpdir_}/no-bus"))
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.startswith("powerfs: --backend=logind talks to systemd-logind "
                          "over the system D-Bus, which is not reachable at "
                          f"unix:path={tmpdir_}/no-bus: "), err
    assert not os.path.ismount(mnt)
