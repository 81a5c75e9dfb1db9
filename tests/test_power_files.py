"""The rest of mainline's /sys/power (mem_sleep, sync_on_suspend, pm_async,
pm_freeze_timeout, pm_test, pm_print_times, pm_debug_messages,
pm_wakeup_irq): each file's mode, content and errors as the reference kernel
showed them (tests/oracle/transcripts/e1-power-files.txt), replayed here
with the same probe and the same commands; and, with a backend that puts the
host to sleep, the host's own files shown as they are and not writable."""

import errno
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import raises_errno, run_in_child, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.path.join(HERE, "oracle")
TRANSCRIPT = os.path.join(ORACLE, "transcripts", "e1-power-files.txt")
# The states of the reference kernel's /sys/power/state.
KERNEL_LIKE = ("-o", "allow_other", "--simulate-sleep-ms=100",
               "--simulate-states=freeze mem")
SETTINGS = ("mem_sleep", "sync_on_suspend", "pm_async", "pm_freeze_timeout",
            "pm_test", "pm_print_times", "pm_debug_messages")


@pytest.fixture(scope="module")
def probe():
    """tests/oracle/pfs.c, built here: the probe the transcripts were made
    with, on PATH for its own "pfs as UID ..." re-executions (so in a
    directory other users reach)."""
    if not shutil.which("busybox"):
        pytest.skip("busybox is not installed (scripts/install-deps.sh)")
    bindir = tempfile.mkdtemp(prefix="powerfs-probe-")
    os.chmod(bindir, 0o755)
    subprocess.run(["gcc", "-O2", "-Wall", "-o", os.path.join(bindir, "pfs"),
                    os.path.join(ORACLE, "pfs.c")], check=True)
    yield bindir
    shutil.rmtree(bindir)


def transcript_blocks(path):
    """[(command, output lines)] of a transcript: each "$ CMD" with what it
    printed, its "rc=N" line included."""
    blocks, cur = [], None
    with open(path, encoding="latin-1") as f:
        for line in f.read().splitlines():
            if line.startswith("$ "):
                cur = (line[2:], [])
                blocks.append(cur)
            elif cur is not None and not line.startswith("#"):
                cur[1].append(line)
                if line.startswith("rc="):
                    cur = None
    return blocks


def replay(probe, mnt, command):
    """What busybox sh -c COMMAND prints on the mount, with the mount's
    path written as /sys/power, as in the transcript."""
    env = dict(os.environ, PATH=probe + ":" + os.environ["PATH"])
    r = subprocess.run(["busybox", "sh", "-c",
                        command.replace("/sys/power", mnt)],
                       capture_output=True, env=env, timeout=30, cwd="/")
    out = (r.stdout + r.stderr).decode("latin-1").replace(mnt, "/sys/power")
    return out.splitlines() + [f"rc={r.returncode}"]


def test_every_command_answers_as_on_the_kernel(mount, probe):
    """Every command of the kernel's transcript, in order on one mount:
    the same system calls get the same bytes and errnos.  Only the listing
    differs (wakeup_sources is in this mount, not in debugfs)."""
    pfs = mount(*KERNEL_LIKE)
    blocks = transcript_blocks(TRANSCRIPT)
    assert len(blocks) > 40
    for command, expected in blocks:
        if command.startswith("ls "):
            continue
        assert replay(probe, pfs.mnt, command) == expected, command


def test_the_listing_is_the_kernels_and_wakeup_sources(mount, probe):
    pfs = mount(*KERNEL_LIKE)
    (_, kernel), = [b for b in transcript_blocks(TRANSCRIPT)
                    if b[0].startswith("ls ")]
    assert sorted(os.listdir(pfs.mnt)) == sorted(kernel[:-1]
                                                 + ["wakeup_sources"])
    for name in SETTINGS:
        st = os.stat(pfs.path(name))
        assert (st.st_mode, st.st_size, st.st_uid) == (0o100644, 4096, 0)
    st = os.stat(pfs.path("pm_wakeup_irq"))
    assert (st.st_mode, st.st_size) == (0o100444, 4096)


@pytest.mark.parametrize("states,listing", [
    ("freeze", b"[s2idle]\n"),
    ("freeze mem", b"s2idle [deep]\n"),
    ("freeze standby mem", b"s2idle shallow [deep]\n"),
    ("standby", b"s2idle [shallow]\n"),
])
def test_mem_sleep_offers_what_the_backend_offers(mount, states, listing):
    pfs = mount(f"--simulate-states={states}")
    assert pfs.read("mem_sleep") == listing
    with raises_errno(errno.EINVAL):
        pfs.write("mem_sleep", b"deep" if b"deep" not in listing
                  else b"shallow" if b"shallow" not in listing else b"x")
    pfs.write("mem_sleep", b"s2idle\n")
    assert pfs.read("mem_sleep").startswith(b"[s2idle]")


def test_a_pm_test_level_ends_each_attempt_before_it_sleeps(mount):
    """As the kernel's test levels stop short of the platform's sleep: the
    write succeeds at once (not after the 30 s a sleep lasts here), counts
    as a success, and no IRQ or other wakeup is known."""
    pfs = mount("--simulate-sleep-ms=30000")
    pfs.write("pm_test", b"freezer")
    t0 = time.monotonic()
    assert pfs.write("state", b"mem") == 3
    assert time.monotonic() - t0 < 10
    assert pfs.read("suspend_stats/success") == b"1\n"
    pfs.write("pm_test", b"none")


def test_mem_sleep_is_refused_while_autosleep_is_on(mount):
    pfs = mount()
    pfs.lock("held")
    pfs.write("autosleep", b"mem")
    with raises_errno(errno.EBUSY):
        pfs.write("mem_sleep", b"s2idle")
    with raises_errno(errno.EBUSY):
        pfs.write("mem_sleep", b"nonsense")
    assert pfs.write("pm_async", b"0") == 1
    pfs.write("autosleep", b"off")
    pfs.unlock("held")
    assert pfs.write("mem_sleep", b"s2idle") == 6


def test_others_may_read_but_not_write(mount):
    pfs = mount("-o", "allow_other")

    def child():
        out = {}
        for name in SETTINGS:
            try:
                os.open(pfs.path(name), os.O_WRONLY)
                out[name] = "opened"
            except OSError as e:
                out[name] = errno.errorcode[e.errno]
        out["read"] = open(pfs.path("mem_sleep"), "rb").read()
        return out
    got = run_in_child(child, uid=1000, gid=1000, groups=[])
    assert got.pop("read") == pfs.read("mem_sleep")
    assert got == {name: "EACCES" for name in SETTINGS}


# --- a backend that puts the host to sleep: the host's files ----------------------

def fake_host(tmp_path, files, irqs=()):
    """A host's sysfs: power/ with state and the files given, and
    kernel/irq/N/actions for each (N, names)."""
    power = tmp_path / "sys" / "power"
    power.mkdir(parents=True)
    for name, text in files.items():
        (power / name).write_bytes(text)
    for n, names in irqs:
        d = tmp_path / "sys" / "kernel" / "irq" / str(n)
        d.mkdir(parents=True)
        (d / "actions").write_bytes(names)
    return power


def test_the_hosts_settings_are_shown_and_not_written(mount, tmp_path):
    host = fake_host(tmp_path, {"state": b"freeze mem\n",
                                "mem_sleep": b"[s2idle] deep\n",
                                "sync_on_suspend": b"0\n",
                                "pm_wakeup_irq": b"9\n"})
    pfs = mount(f"--backend=sysfs:{host}")
    names = set(os.listdir(pfs.mnt))
    # What the host lacks is not there either.
    assert {"mem_sleep", "sync_on_suspend", "pm_wakeup_irq"} <= names
    assert not names & {"pm_async", "pm_test", "pm_freeze_timeout",
                        "pm_print_times", "pm_debug_messages"}
    assert pfs.read("mem_sleep") == b"[s2idle] deep\n"
    assert pfs.read("sync_on_suspend") == b"0\n"
    assert pfs.read("pm_wakeup_irq") == b"9\n"
    (host / "mem_sleep").write_bytes(b"s2idle [deep]\n")
    assert pfs.read("mem_sleep") == b"s2idle [deep]\n"
    # Root included: as in a container whose /sys is read-only.
    for name in ("mem_sleep", "sync_on_suspend"):
        for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
            with raises_errno(errno.EROFS):
                os.open(pfs.path(name), flags)
    with raises_errno(errno.EACCES):
        os.open(pfs.path("pm_wakeup_irq"), os.O_WRONLY)
    assert (host / "mem_sleep").read_bytes() == b"s2idle [deep]\n"


def test_hibernation_settings_only_where_disk_is_offered(mount, tmp_path):
    files = {"disk": b"[platform] shutdown reboot suspend test_resume \n",
             "image_size": b"3290812416\n", "resume": b"0:0\n"}
    with_disk = fake_host(tmp_path / "a", dict(files, state=b"mem disk\n"))
    without = fake_host(tmp_path / "b", dict(files, state=b"mem\n"))
    pfs = mount(f"--backend=sysfs:{with_disk}")
    assert {"disk", "image_size", "resume"} <= set(os.listdir(pfs.mnt))
    assert "reserved_size" not in os.listdir(pfs.mnt)
    assert pfs.read("disk") == files["disk"]
    with raises_errno(errno.EROFS):
        os.open(pfs.path("resume"), os.O_WRONLY)
    other = mount(f"--backend=sysfs:{without}")
    assert not {"disk", "image_size", "resume"} & set(os.listdir(other.mnt))
    # The simulated backend keeps no hibernation image.
    sim = mount("--simulate-states=freeze mem disk")
    assert not {"disk", "image_size", "resume"} & set(os.listdir(sim.mnt))


def test_settings_are_not_mistaken_for_statistics(pfs):
    """Android parses every suspend_stats file but two as an integer: the
    new files stay out of that directory."""
    names = os.listdir(pfs.path("suspend_stats"))
    for name in names:
        data = pfs.read(f"suspend_stats/{name}")
        if name not in ("last_failed_dev", "last_failed_step"):
            assert re.fullmatch(rb"-?[0-9]+\n", data), (name, data)
    assert len(names) == 13


def test_settings_survive_a_crash_of_the_server(mount):
    """The keeper's next server has them from the state file: a setting
    acknowledged is a setting kept."""
    pfs = mount()
    writes = {"mem_sleep": b"s2idle", "sync_on_suspend": b"0",
              "pm_async": b"0", "pm_print_times": b"1",
              "pm_debug_messages": b"1", "pm_freeze_timeout": b"5000",
              "pm_test": b"devices"}
    for name, data in writes.items():
        assert pfs.write(name, data) == len(data)
    shown = {name: pfs.read(name) for name in writes}
    server = pfs.server_pid()
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: pfs.server_pid() != server, timeout=10)
    assert {name: pfs.read(name) for name in writes} == shown
    assert shown["pm_test"] == b"none core processors platform [devices] " \
                               b"freezer\n"
    pfs.write("pm_test", b"none")
