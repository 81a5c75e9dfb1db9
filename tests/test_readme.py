"""Every command README.md shows runs as shown, and says what the README
says it says.

Each fenced block of the README is claimed by exactly one test here, or
listed in SKIPPED with the reason it cannot run in the suite; a new block
that nothing claims fails test_every_block_is_claimed.

The README's commands are typed in a checkout where `make run` built
./powerfs.  Here they run in a workspace that looks like that checkout
(./powerfs, scripts/, dist/) but whose ./powerfs is the build under test
($POWERFS: the sanitizer build under `make check SANITIZE=1`).  Where a
command names a placeholder (NAME, /path/to/powerfs), the test fills it
in; where the README tells a host without something to add an option,
the test adds it, since this machine lacks it (no lxcbr0, no systemd).
Output shown as real output is compared line by line; in rows of
wakeup_sources the times vary from run to run, so the name and the four
counters are compared, and the times must be numbers.

The session's /tmp/p and the recipes' /run/power are fixed paths: runs
take turns through lock files (the LXC tests' lock for /run/power), and
skip if someone else's mount is there.
"""

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile

import pytest

import conftest
from test_lxc import mount_points, run_power_lock

README = conftest.REPO / "README.md"
SESSION_MNT = "/tmp/p"
SESSION_LOCK = "/run/lock/powerfs-test-readme-session.lock"
LOCK_WAIT = 120.0

# Blocks that cannot run in the suite, by their first line, and why.
SKIPPED = {
    "echo 'lxc.include = /path/to/powerfs/dist/lxc/powerfs.conf' >> "
    "/var/lib/waydroid/lxc/waydroid/config":
        "Waydroid is not installed on the test machines (the README says "
        "so); the line only appends the LXC include that test_lxc_recipe "
        "runs",
}
# Commands of a claimed block that are not run, and why.
NOT_RUN = {
    "make check": "it is the suite that runs this test",
}


def fenced_blocks():
    """[(info, text)] of README.md's ``` blocks."""
    blocks, current, info = [], None, None
    for line in README.read_text().splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                blocks.append((info, "".join(current)))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def block(first):
    """The one block whose first line starts with first."""
    found = [text for _, text in fenced_blocks() if text.startswith(first)]
    assert len(found) == 1, f"README.md: {len(found)} blocks start {first!r}"
    return found[0]


# The blocks each test runs, by the start of their first line.
CLAIMS = {
    "make run": "test_make_run",
    "$ mkdir -p /tmp/p": "test_short_session",
    "# scripts/powerfs-container": "test_powerfs_container",
    "mkdir -p /run/power": "test_lxc_recipe",
    "lxc.include = /path/to/powerfs": "test_lxc_recipe",
    "lxc-start -n NAME": "test_lxc_recipe",
    "systemd-nspawn -D": "test_nspawn_recipe",
}


def test_every_block_is_claimed():
    for info, text in fenced_blocks():
        first = text.split("\n", 1)[0]
        claims = [c for c in CLAIMS if first.startswith(c)]
        skipped = first in SKIPPED
        assert len(claims) + skipped == 1, \
            f"README.md block {first!r}: claimed by {claims}, skipped " \
            f"{skipped}: run it in a test here, or say in SKIPPED why not"


# --- running shell text ----------------------------------------------------------

@contextlib.contextmanager
def workspace():
    """A directory that looks like a checkout after `make run`, whose
    ./powerfs is the build under test."""
    d = tempfile.mkdtemp(prefix="powerfs-readme-")
    try:
        os.symlink(conftest.POWERFS, os.path.join(d, "powerfs"))
        for name in ("scripts", "dist", "powerfs-report"):
            os.symlink(conftest.REPO / name, os.path.join(d, name))
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def commands(text, prompts=("$ ", "# ")):
    """[(command, [expected output lines])] of a console block: a command
    starts at a prompt and goes on while its quotes are open or its line
    ends in a backslash."""
    out, cmd = [], None
    for line in text.splitlines():
        if cmd is not None and not complete(cmd):
            cmd += "\n" + line
            out[-1] = (cmd, [])
            continue
        if line.startswith(prompts):
            cmd = line[2:]
            out.append((cmd, []))
        else:
            out[-1][1].append(line)
    return out


def complete(cmd):
    if cmd.endswith("\\"):
        return False
    try:
        shlex.split(cmd, comments=True)
    except ValueError:
        return False
    return True


def run_script(cmds, cwd, timeout=60):
    """Run the commands in one bash, as typed: stdout and stderr together,
    in order.  Returns each command's output lines."""
    script = ["exec 2>&1"]
    for i, cmd in enumerate(cmds):
        script.append(f"printf '@@%d@@\\n' {i}")
        script.append(cmd)
    script.append("printf '@@end@@\\n'")
    r = subprocess.run(["bash", "-s"], input="\n".join(script) + "\n",
                       cwd=cwd, capture_output=True, text=True,
                       timeout=timeout * conftest.TIME_SCALE,
                       env=user_env())
    parts = re.split(r"@@(\d+|end)@@\n", r.stdout)
    assert parts[-2:] == ["end", ""], r.stdout
    outs = {}
    for i in range(1, len(parts) - 2, 2):
        outs[int(parts[i])] = parts[i + 1].splitlines()
    return [outs.get(i, []) for i in range(len(cmds))]


def user_env():
    """The environment of a user's shell: not the test run's make (whose
    command-line variables, SANITIZE=1, make exports to its commands)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "POWERFS",
                        "SANITIZE")}
    env["LC_ALL"] = "C.UTF-8"
    return env


SOURCE_ROW = re.compile(r"^(\S+) *\t((?:\d+\t\t){8}\d+)$")


def same_line(want, got):
    """The README's line and the one printed now: equal, or two rows of
    wakeup_sources with the same name and counters (times vary)."""
    got = re.sub(r"^bash: line \d+: ", "bash: ", got)
    if want == got:
        return True
    w, g = SOURCE_ROW.match(want), SOURCE_ROW.match(got)
    if not (w and g) or w.group(1) != g.group(1):
        return False
    return w.group(2).split("\t\t")[:4] == g.group(2).split("\t\t")[:4]


def check_output(cmd, want, got):
    assert len(want) == len(got) and all(map(same_line, want, got)), \
        f"README.md shows for `{cmd}`:\n" + "\n".join(want) + \
        "\n... but it printed:\n" + "\n".join(got)


def end_daemons(mnt, pids):
    """Unmount mnt if a failed test left it, and end the powerfs this
    test started there."""
    if os.path.ismount(mnt):
        subprocess.run([conftest.FUSERMOUNT, "-u", mnt], capture_output=True)
    if not conftest.wait_until(
            lambda: not any(os.path.exists(f"/proc/{p}") for p in pids),
            timeout=conftest.EXIT_TIMEOUT):
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        subprocess.run([conftest.FUSERMOUNT, "-uz", mnt], capture_output=True)
        pytest.fail(f"powerfs on {mnt} did not end after the unmount")


# --- the blocks ------------------------------------------------------------------

@pytest.mark.timeout(900)
def test_make_run():
    """`make run` installs what running needs (nothing, here), builds
    ./powerfs, and serves /run/power in the foreground until Ctrl-C.  The
    build is a plain one, as a user's is, whatever this run tests."""
    text = block("make run")
    cmds = [re.sub(r"\s*#.*", "", line).strip() for line in text.splitlines()]
    cmds = [c for c in cmds if c]
    assert cmds == ["make run", "make check"], cmds
    assert set(cmds) - {"make run"} == set(NOT_RUN)
    if os.geteuid() != 0:
        pytest.skip("make run mounts /run/power: root")
    with run_power_lock(), mount_points():
        proc = subprocess.Popen(["make", "run"], cwd=conftest.REPO,
                                env=user_env(), start_new_session=True,
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        pids = []
        try:
            # Building may take minutes under a sanitizer run (no plain
            # build yet); serving starts right after.
            assert conftest.wait_until(
                lambda: os.path.ismount("/run/power") or
                proc.poll() is not None, timeout=600), "make run: no mount"
            assert proc.poll() is None, proc.stdout.read().decode()
            pids = conftest.powerfs_pids("/run/power")
            with open("/run/power/state", "rb") as f:
                assert f.read() == b"freeze mem disk\n"
            os.killpg(proc.pid, signal.SIGINT)      # Ctrl-C
            proc.wait(conftest.EXIT_TIMEOUT * conftest.TIME_SCALE)
            assert conftest.wait_until(
                lambda: not os.path.ismount("/run/power"),
                timeout=conftest.EXIT_TIMEOUT), "Ctrl-C left the mount"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            out = proc.stdout.read().decode(errors="replace")
            proc.stdout.close()
            end_daemons("/run/power", pids)
        bad = [line for line in out.splitlines()
               if any(x in line for x in conftest.BAD_LOG_PATTERNS)]
        assert not bad, out
        assert os.path.samefile(conftest.REPO / "powerfs",
                                conftest.REPO / "build/default/powerfs") or \
            (conftest.REPO / "powerfs").read_bytes() == \
            (conftest.REPO / "build/default/powerfs").read_bytes()


def test_short_session():
    """The session, command by command in one shell, with the output the
    README shows."""
    if os.geteuid() != 0:
        pytest.skip("the session writes wake_lock: root")
    cmds = commands(block("$ mkdir -p /tmp/p"))
    assert cmds[0][0].startswith(f"mkdir -p {SESSION_MNT} && ./powerfs "
                                 f"{SESSION_MNT}")
    assert cmds[-1][0] == f"cd / && fusermount3 -u {SESSION_MNT}"
    with conftest.exclusive(SESSION_LOCK, LOCK_WAIT), workspace() as ws:
        if os.path.ismount(SESSION_MNT):
            pytest.skip(f"{SESSION_MNT} is someone's mount point")
        pids = []
        try:
            first = run_script([cmds[0][0]], ws)
            check_output(cmds[0][0], cmds[0][1], first[0])
            pids = conftest.powerfs_pids(SESSION_MNT)
            assert len(pids) == 2, pids     # the keeper and its server
            outs = run_script([c for c, _ in cmds[1:]], ws)
            for (cmd, want), got in zip(cmds[1:], outs):
                check_output(cmd, want, got)
        finally:
            end_daemons(SESSION_MNT, pids)
            with contextlib.suppress(OSError):
                os.rmdir(SESSION_MNT)


def test_powerfs_container():
    if os.geteuid() != 0:
        pytest.skip("powerfs-container mounts: root")
    [(cmd, want)] = commands(block("# scripts/powerfs-container"))
    with workspace() as ws:
        [got] = run_script([cmd], ws)
    check_output(cmd, want, got)


@pytest.fixture(scope="module")
def host_powerfs():
    """The LXC recipe's host commands, run as shown: powerfs on /run/power
    (and the class/wakeup and wakeup_reasons mounts) in the background."""
    if os.geteuid() != 0:
        pytest.skip("the recipes mount /run/power: root")
    text = block("mkdir -p /run/power")
    with run_power_lock(), mount_points(), workspace() as ws:
        pids = []
        try:
            r = subprocess.run(["bash", "-e", "-s"], input=text, cwd=ws,
                               capture_output=True, text=True, timeout=60,
                               env=user_env())
            assert r.returncode == 0, r.stdout + r.stderr
            assert os.path.ismount("/run/power")
            pids = conftest.powerfs_pids("/run/power")
            yield
        finally:
            end_daemons("/run/power", pids)
            for d in ("/run/power-wakeup", "/run/power-reasons"):
                assert not os.path.ismount(d), f"{d} left mounted"


@pytest.mark.timeout(300)
def test_lxc_recipe(host_powerfs):
    """A busybox container in LXC's default place, configured with the
    README's lines (this checkout's path for /path/to/powerfs; this host
    has no lxcbr0, so lxc.net.0.type = empty applies), started and asked
    for its /sys/power/state with the README's command."""
    for tool in ("lxc-create", "lxc-start", "lxc-attach"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} missing: run scripts/install-deps.sh")
    name = f"powerfs-readme-{os.getpid()}"
    conf = block("lxc.include = /path/to/powerfs").replace(
        "/path/to/powerfs", str(conftest.REPO))
    start = block("lxc-start -n NAME").replace("NAME", name)
    r = subprocess.run(["lxc-create", "-n", name, "-t", "busybox"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    try:
        path = subprocess.run(["lxc-config", "lxc.lxcpath"],
                              capture_output=True, text=True).stdout.strip()
        with open(os.path.join(path or "/var/lib/lxc", name, "config"),
                  "a") as f:
            f.write("\n" + conf)
        r = subprocess.run(["bash", "-c", start], capture_output=True,
                           text=True, timeout=120, env=user_env())
        assert (r.returncode, r.stdout) == (0, "freeze mem disk\n"), r.stderr
    finally:
        subprocess.run(["lxc-stop", "-k", "-n", name], capture_output=True,
                       timeout=60)
        subprocess.run(["lxc-destroy", "-f", "-n", name], capture_output=True,
                       timeout=60)


@pytest.mark.timeout(120)
def test_nspawn_recipe(host_powerfs, rootfs):
    """The README's nspawn command on a busybox root file system (for
    /var/lib/machines/NAME), with what the README says a host without
    systemd adds, and a command for the container to run: its root takes
    and releases a wake lock, which needs CAP_BLOCK_SUSPEND."""
    text = block("systemd-nspawn -D")
    assert "--register=no --keep-unit" in README.read_text()
    argv = shlex.split(text.replace("/var/lib/machines/NAME", rootfs)
                       .replace("\\\n", " "), comments=True)
    assert argv[0] == "systemd-nspawn" and conftest.NSPAWN
    argv += ["--register=no", "--keep-unit", "--quiet", "--console=pipe",
             f"--machine=powerfs-readme-{os.getpid()}", "/bin/sh", "-c",
             "echo readme > /sys/power/wake_lock && cat /sys/power/wake_lock"
             " && echo readme > /sys/power/wake_unlock"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert (r.returncode, r.stdout) == (0, "readme\n"), r.stderr
    with open("/run/power/wake_unlock", "rb") as f:
        assert b"readme" in f.read().split()
