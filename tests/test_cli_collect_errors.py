"""The collect commands' refusals through the real ``diode`` CLI (a subprocess): each names the
command line's own flags, and comes before any work (no output file, nothing compiled)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
REAL = str(REPO / "data" / "shapesets" / "real_models.json")
DATA = str(REPO / "tests" / "data" / "small_synthetic.msgpack")
CPU = ("--device", "cpu", "--ops", "bmm", "--hardware", "cpu-test", "--no-progress")


def _refused(run_diode, tmp_path: Path, *args: str, timeout: float = 120) -> str:
    proc = run_diode(*args, "--output", str(tmp_path / "out.json"), timeout=timeout)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert not (tmp_path / "out.json").exists()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_more_shapes_than_the_space_holds_are_refused_at_once(run_diode, tmp_path):
    # Regression: the sampler drew 100 * n times before failing (10,000,000 draws, over two minutes,
    # for this request), then said "widen the ranges".
    err = _refused(
        run_diode, tmp_path, "collect", "-n", "100000", "--sampler", "pow2", "--dtypes", "float32",
        "--layouts", "row/row", "--min-dim", "16", "--max-dim", "32", *CPU, timeout=60,
    )  # fmt: skip
    # 2**3 sizes x 7 batches (1 to 64, powers of two: the pow2 sampler's bmm batches)
    assert err == (
        "diode collect: error: --num-shapes/-n 100000: the space holds only 56 distinct problems; lower "
        "--num-shapes/-n to at most 56, or widen the space (--min-dim/--max-dim, --ops, --dtypes, --layouts)"
    )


@pytest.mark.parametrize("sampler", ["uniform", "pow2"])
def test_a_min_dim_no_problem_fits_names_the_operand_cap(run_diode, tmp_path, sampler):
    # Regression: "drew only 0 distinct problems of 10 in 1000 tries; widen the ranges", where widening
    # cannot help: every operand of these sizes is over the 2**28-element cap.
    err = _refused(
        run_diode, tmp_path, "collect", "-n", "10", "--sampler", sampler, "--min-dim", "20000", "--max-dim", "40000",
        *CPU,
    )  # fmt: skip
    assert err.startswith(
        "diode collect: error: no problem fits under the operand size cap (2**28 = 268,435,456 elements, batch "
        "included; not an option): with --min-dim 20000 every M, N and K is at least "
    )
    assert err.endswith("lower --min-dim to at most 16384") and "widen" not in err


@pytest.mark.parametrize(
    ("cap", "text", "min_dim"),
    [(2**30, "2**30 = 1,073,741,824", 40000), (10**9, "1,000,000,000", 40000), (2**28, "2**28 = 268,435,456", 20000)],
)
def test_the_operand_cap_text_follows_the_constant(monkeypatch, capsys, tmp_path, cap, text, min_dim):
    # Regression: the command line wrote "2**28" itself beside the constant's value, so another
    # MAX_OPERAND_ELEMENTS would have read "2**28 = 1,073,741,824".
    from torch_diode.cli import main
    from torch_diode.shapes import sampling

    monkeypatch.setattr(sampling, "MAX_OPERAND_ELEMENTS", cap)
    args = ["collect", "-n", "10", "--sampler", "uniform", "--min-dim", str(min_dim), "--max-dim", "50000", *CPU]
    assert main([*args, "--output", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"diode collect: error: no problem fits under the operand size cap ({text} elements, batch included; not "
        f"an option): with --min-dim {min_dim} every M, N and K is at least "
    ), err
    assert err.endswith(f"lower --min-dim to at most {math.isqrt(cap)}"), err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("collect", "-n", "1", "--top-up", *CPU), "--top-up applies to --collector sweep"),
        (("collect", "-n", "1", "--checkpoint", "30", *CPU), "--checkpoint applies to --collector sweep"),
        (("collect", "-n", "1", "--workers", "0", *CPU), "--workers: must be at least 1"),
        # These came after the GPU check: on a machine without one they were never reported, and on
        # one they named the fields (checkpoint_s, max_configs).
        (("collect", "-n", "1", "--collector", "sweep", "--checkpoint", "0"),
         "--checkpoint: must be a positive number of seconds, got 0"),
        (("collect", "-n", "1", "--collector", "sweep", "--max-configs", "0"),
         "--max-configs: must be a positive integer, got 0"),
        (("collect-shapeset", "--shapeset", REAL, "--top-up", *CPU), "--top-up applies to --collector sweep"),
        (("collect-problems", "--from", DATA, "--workers", "-1", "--device", "cpu"), "--workers: must be at least 1"),
        (("create-validation", "--train", DATA, "-n", "1", "--checkpoint", "5", *CPU),
         "--checkpoint applies to --collector sweep"),
    ],
)  # fmt: skip
def test_collect_option_errors_name_the_flag(run_diode, tmp_path, args, expected):
    # Regression: `top_up: only the sweep collector ...`, `checkpoint_s: ...` and `workers: must be
    # a positive integer or None`: CollectOptions' field names (and None), not the flags.
    err = _refused(run_diode, tmp_path, *args)
    assert err.startswith(f"diode {args[0]}: error: {expected}"), err
    for field in ("top_up", "checkpoint_s", "max_configs", "workers:", "None"):
        assert field not in err.replace("--workers", ""), err


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        (("collect", "--log-normal"), ("--min-dim", "20000")),
        (("collect", "--sampler", "log-normal"), ("--min-dim", "64", "--max-dim", "512")),
        (("create-validation", "--train", DATA, "--log-normal"), ("--max-dim", "512")),
    ],
)
def test_a_size_range_with_the_log_normal_sampler_is_refused(run_diode, tmp_path, command, flags):
    # Regression: the log-normal sampler draws its sizes from its fit and ignored --min-dim and
    # --max-dim without a word (`--log-normal --min-dim 20000` sampled the usual sizes).
    err = _refused(run_diode, tmp_path, *command, "-n", "3", *flags, *CPU)
    given = "/".join(f for f in flags if f.startswith("--"))
    verb = "apply" if "/" in given else "applies"
    assert err.startswith(f"diode {command[0]}: error: {given} {verb} to --sampler uniform and pow2; "), err
    assert err.endswith("or sample with --sampler uniform or pow2"), err
