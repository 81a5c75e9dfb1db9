"""make fuzz, as HACKING.md shows it: the harnesses build, and each one
replays its committed corpus (inputs that once found a bug stay fixed)."""

import subprocess

import pytest

import conftest

# Each harness and the corpus it replays (Makefile: FUZZERS).
HARNESSES = {
    "fuzz-store": "fuzz/corpus",
    "fuzz-fs": "fuzz/corpus-fs",
    "fuzz-class-wakeup": "fuzz/corpus-class-wakeup",
    "fuzz-state-file": "fuzz/corpus-state-file",
}


@pytest.fixture(scope="module")
def built():
    r = subprocess.run(["make", "-C", str(conftest.REPO), "fuzz"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_harness_replays_its_corpus(built, name):
    corpus = conftest.REPO / HARNESSES[name]
    inputs = sorted(p for p in corpus.iterdir() if p.is_file())
    assert inputs, corpus
    # Given files, libFuzzer runs each once and exits: 0 when none crashed.
    r = subprocess.run([str(conftest.REPO / "build/fuzz" / name)] +
                       [str(p) for p in inputs],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr.count("Running: ") == len(inputs), r.stderr[-3000:]
    assert r.stderr.count("Executed ") == len(inputs), r.stderr[-3000:]
