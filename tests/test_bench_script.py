"""scripts/bench runs as docs/performance.md says it was run: a smoke run
of one round of its pair rows, with the page's own variants, writing the
page again (to a temporary file).

The bench is a measuring tool (its figures are not asserted here: timed
tests would fail on a busy machine); this checks that the command that
made docs/performance.md works from a user's shell (it builds ./powerfs
itself, whatever build the tree holds), prints both floors and every
variant, writes a page with the method, the machine, the load and the
table, and leaves nothing mounted behind.
"""

import os
import re
import shlex
import subprocess

import pytest

import conftest

PAGE = conftest.REPO / "docs" / "performance.md"


def page_command(text):
    """The command a page written by scripts/bench --markdown names as the
    one that made it."""
    m = re.search(r"\n- Command:\n\n +```\n +(scripts/bench .*)\n +```\n", text)
    assert m, "the page names no scripts/bench command"
    return shlex.split(m.group(1))


def user_env():
    """A user's shell: not this run's make (whose SANITIZE=1 would reach
    the bench's own build)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


@pytest.mark.timeout(600)
def test_the_performance_pages_command_runs(tmp_path):
    argv = page_command(PAGE.read_text())
    assert "--markdown" in argv, argv
    variants = [argv[i + 1].split("=", 1)[0] for i, a in enumerate(argv)
                if a == "--variant"]
    assert variants, argv
    # One round of rows 1 and 2 only: the rest is what a full run adds.
    # The last --rounds and --markdown count.
    page = tmp_path / "performance.md"
    r = subprocess.run(argv + ["--pairs-only", "--rounds", "1",
                               "--markdown", str(page)],
                       cwd=conftest.REPO, capture_output=True, text=True,
                       timeout=580, env=user_env())
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert re.search(r"\n1 +lock\+unlock pair, 1 client +us/pair +\d", out), out
    assert re.search(r"\n +single-threaded floor \(right col\.\) +us/pair +\d", out), out
    assert re.search(r"\n2 +pairs, 4 clients in parallel +pairs/s +\d", out), out
    # Against whichever do-nothing server was fastest in this run.
    fastest = re.findall(r"\n +powerfs vs the fastest floor, the (MT loop|"
                         r"single-threaded loop|MT loop with clone_fd|poll loop) "
                         r"+(us/pair|pairs/s) +\d", out)
    assert [unit for _, unit in fastest] == ["us/pair", "pairs/s"], out
    # The floor that checks each writer's capability, as the kernel does.
    assert len(re.findall(r"\n +MT floor \+ capget per write \(the kernel's "
                          r"check\) \(right col\.\) +(?:us/pair|pairs/s) +\d",
                          out)) == 2, out
    assert re.findall(r"\n +powerfs vs the MT floor with capget +(us/pair|pairs/s) +\d",
                      out) == ["us/pair", "pairs/s"], out
    for v in variants:
        assert re.search(r"\n +variant %s \(right col\.\), 1 client +us/pair +\d"
                         % re.escape(v), out), (v, out)
        assert re.search(r"\n +variant %s \(right col\.\), 4 clients +pairs/s +\d"
                         % re.escape(v), out), (v, out)
    assert re.search(r"\nbench: \d of 2 targets met", out), out
    with open("/proc/self/mounts") as f:
        assert "/powerfs-bench." not in f.read()
    # The page: what the committed one has, from this run.
    text = page.read_text()
    for heading in ("# Performance\n", "\n## The method\n", "\n## The run\n"):
        assert heading in text, heading
    assert re.search(r"\n- Machine: .*, \d+ CPUs? .*; .*, Linux \S+; "
                     r"libfuse [\d.]+\.\n", text), text
    assert re.search(r"\n- Load average \(1 minute\): [\d.]+ at the start", text), text
    assert "\n| # | measure | unit | floor | powerfs | ratio | target |  |\n" in text
    assert re.search(r"\n\| 1 \| lock\+unlock pair, 1 client \| us/pair \| [\d.]+ \| "
                     r"[\d.]+ \| [\d.]+ \| ratio <= 1.05 \| (met|missed) \|\n", text), text
    for v in variants:
        assert "| variant %s (right col.), 1 client |" % v in text, v
    assert page_command(text)[-4:] == ["--rounds", "1", "--markdown",
                                       str(page)]


def test_bench_open_runs():
    """scripts/bench-open, small: it prints a row per round and build and
    the medians with the ratio against the single opener, and leaves
    nothing mounted."""
    r = subprocess.run(["scripts/bench-open", "--powerfs", conftest.POWERFS,
                        "--rounds", "1", "--threads",
                        "20", "--each", "2", "--single", "50", "--also",
                        conftest.POWERFS], cwd=conftest.REPO,
                       capture_output=True, text=True, timeout=120)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert len(re.findall(r"\nround 1 (powerfs|also) +single +[\d.]+ us/open +"
                          r"concurrent +[\d.]+ us/open +ratio +[\d.]+", out)) == 2, out
    assert len(re.findall(r"\n +(powerfs|also) +single .* ratio [\d.]+ \((NOT )?"
                          r"within 2x\)", out)) == 2, out
    with open("/proc/self/mounts") as f:
        assert "/powerfs-bench-open-" not in f.read()
