"""python3 -m kiln: the command line for Python users (python/kiln/__main__.py),
run as a user runs it, in a subprocess, on the shared mlp_gelu model whose
references are ONNX Runtime's."""

import os
import pty
import subprocess
import sys

import numpy as np
import pytest

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
MLP = os.path.join(HERE, "..", "..", "..", "shared", "models", "mlp_gelu")
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))

pytestmark = pytest.mark.skipif(not os.path.isdir(MLP), reason="../shared/models not present")


def kiln_cli(*args, env=None, cwd=None):
    e = dict(os.environ, PYTHONPATH=PACKAGE_PARENT, **(env or {}))
    return subprocess.run([sys.executable, "-m", "kiln", *args], capture_output=True, text=True,
                          env=e, cwd=cwd)


def test_run_checks_against_the_references():
    data = os.path.join(MLP, "test_data_set_0")
    r = kiln_cli("run", os.path.join(MLP, "model.onnx"), "--inputs", data, "--check", data,
                 "--no-cache", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "output 0 'output': float32[64x1024]" in r.stdout
    assert "check output 0: match" in r.stdout


def test_run_writes_outputs_and_reports_a_mismatch_with_status_1(tmp_path):
    data = os.path.join(MLP, "test_data_set_0")
    want = kiln.read_tensor(os.path.join(data, "output_0.pb"))
    r = kiln_cli("run", os.path.join(MLP, "model.onnx"), "--input",
                 f"input={os.path.join(data, 'input_0.pb')}", "--outputs", str(tmp_path),
                 "--no-cache", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert np.allclose(np.load(tmp_path / "output_0.npy"), want, atol=1e-4, rtol=1e-3)
    # A reference off by 0.01 everywhere (ten times the tolerance).
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    np.save(wrong / "output_0.npy", want + 0.01)
    r = kiln_cli("run", os.path.join(MLP, "model.onnx"), "--inputs", data, "--check",
                 str(wrong), "--no-cache", "--threads", "1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "check output 0: MISMATCH" in r.stdout


def test_errors_are_one_line_and_status_2(tmp_path):
    r = kiln_cli("run", str(tmp_path / "missing.onnx"))
    assert r.returncode == 2
    assert r.stderr.startswith("kiln: error:") and "missing.onnx" in r.stderr
    r = kiln_cli("run", os.path.join(MLP, "model.onnx"), "--no-cache")
    assert r.returncode == 2
    assert "no value for input(s) 'input'" in r.stderr


def test_compile_writes_an_object(tmp_path):
    out = tmp_path / "mlp.o"
    r = kiln_cli("compile", os.path.join(MLP, "model.onnx"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x7fELF"
    assert str(out) in r.stdout


def test_bench_prints_a_median():
    data = os.path.join(MLP, "test_data_set_0")
    r = kiln_cli("bench", os.path.join(MLP, "model.onnx"), "--inputs", data, "--runs", "3",
                 "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "bench: runs=3 median_ms=" in r.stdout
    # No runs, no median: a usage error before anything compiles.
    r = kiln_cli("bench", os.path.join(MLP, "model.onnx"), "--inputs", data, "--runs", "0")
    assert r.returncode == 2 and "--runs: must be at least 1, not 0" in r.stderr


def test_progress_only_on_a_terminal(tmp_path):
    model = os.path.join(MLP, "model.onnx")
    # Not a terminal (a pipe): nothing on stderr.
    r = kiln_cli("compile", model, "-o", str(tmp_path / "a.o"),
                 env={"KILN_PROGRESS_AFTER_S": "0"})
    assert r.returncode == 0 and "compiling" not in r.stderr
    # A terminal: the compile's time is shown while it runs.
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["PYTHONPATH"] = PACKAGE_PARENT
        os.environ["KILN_PROGRESS_AFTER_S"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "kiln", "compile", model, "-o",
                                  str(tmp_path / "b.o")])
    seen = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, seen
    assert b"kiln: compiling model.onnx ... " in seen
