# ruff: noqa: F811  (pytest fixtures imported from test_inductor_helpers are redefined as arguments)
"""The Inductor collector on CPU, driven through real Inductor compiles.

On CPU, ``torch.bmm`` under max-autotune benchmarks two choices (ATen and the C++ bmm template),
so the real feedback saver fires with real ``ChoiceCaller`` objects (reference section 7). CPU
timings are noise: these tests check structure and unit conversion, never values.
"""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from test_inductor_helpers import diode_dataset, model_path  # noqa: E402, F401  (fixtures)

from torch_diode.collect.inductor import (  # noqa: E402
    FeedbackRecorder,
    InductorCollector,
    classify_failure,
    make_inputs,
    raised_by_saver,
    registered_saver,
)
from torch_diode.records import Choice, Problem  # noqa: E402

BMM = Problem(op="bmm", m=16, n=8, k=24, batch=2, dtype="float32")


def _savers() -> list:
    from torch._inductor.select_algorithm import get_algorithm_selector_cache

    return list(get_algorithm_selector_cache().feedback_saver_fns)


@pytest.fixture(scope="module")
def bmm_run():
    """One real max-autotune compile of a bmm, seen by the collector and by a plain second saver."""
    raw: list[tuple[str, dict[str, float], bool]] = []

    def plain_saver(timings, name, input_nodes, choices, profiled_time, precompile_times=None):
        raw.append((name, {c.name: ms for c, ms in timings.items()}, precompile_times is not None))

    with registered_saver(plain_saver):
        before = _savers()
        with InductorCollector(hardware="cpu-test", device="cpu") as collector:
            inside = _savers()
            records, failures = collector.measure(BMM)
        after = _savers()
    return {
        "records": records,
        "failures": failures,
        "raw": raw,
        "skipped": dict(collector.skipped),
        "before": before,
        "inside": inside,
        "after": after,
        "final": _savers(),
        "plain": plain_saver,
    }


def test_records_every_choice_with_a_config(bmm_run):
    records = bmm_run["records"]
    assert bmm_run["failures"] == []
    assert [r.choice for r in records] == [Choice.aten("bmm")]
    r = records[0]
    assert r.problem == BMM  # Inductor's view of the inputs equals the requested problem
    assert r.hardware == "cpu-test"
    # The C++ bmm choice has no KTC (added outside the choices hook): skipped and counted.
    assert bmm_run["skipped"] == {"CPP": 1}


def test_time_is_inductor_ms_times_1000(bmm_run):
    ((name, timings, _),) = bmm_run["raw"]
    assert name == "bmm" and len(timings) == 2  # ATen + CPP were benchmarked
    assert bmm_run["records"][0].time_us == timings["bmm"] * 1000.0


def test_saver_added_and_removed_exactly(bmm_run):
    plain = bmm_run["plain"]
    assert bmm_run["inside"] == [*bmm_run["before"], bmm_run["inside"][-1]]
    assert isinstance(bmm_run["inside"][-1], FeedbackRecorder)
    assert bmm_run["after"] == bmm_run["before"]  # only our saver went; the plain one stayed
    assert plain in bmm_run["after"] and plain not in bmm_run["final"]


def test_saver_accepts_both_feedback_arities():
    # torch 2.10 passes 5 arguments, 2.11+ 6 (precompile_times): both must bind.
    sig = inspect.signature(FeedbackRecorder())
    sig.bind(*range(5))
    sig.bind(*range(6))
    with pytest.raises(TypeError):
        sig.bind(*range(7))


def test_wrong_arity_is_fatal_not_a_problem_failure():
    # Regression pin: a saver Inductor cannot call raises TypeError inside the compile, which a
    # per-problem handler would record as a "compile error" on every problem. It must abort instead.
    from torch._inductor.exc import InductorError

    rec = FeedbackRecorder()
    with pytest.raises(TypeError) as info:
        rec(*range(7))
    wrapped = InductorError(info.value, "")
    assert rec.error is None  # the call never entered the saver's body
    assert raised_by_saver(wrapped, rec)
    assert not raised_by_saver(InductorError(RuntimeError("ptxas failed"), ""), FeedbackRecorder())


def test_error_inside_the_saver_is_fatal():
    rec = FeedbackRecorder()
    with pytest.raises(Exception) as info:
        # An op torch-diode knows, with input nodes it cannot read (and no graph context).
        rec({}, "mm", [object(), object()], [], None, {})
    assert rec.error is info.value
    assert raised_by_saver(RuntimeError("compile failed"), rec)


def test_failure_classification():
    from torch._inductor.exc import InductorError
    from torch._inductor.select_algorithm import NoValidChoicesError

    assert classify_failure(torch.OutOfMemoryError("CUDA out of memory")) == "oom"
    assert classify_failure(InductorError(NoValidChoicesError("none"), "")) == "no_valid_config"
    assert classify_failure(InductorError(RuntimeError("x"), "")) == "compile_error"
    assert classify_failure(RuntimeError("illegal memory access")) == "runtime_error"


def test_problem_not_autotuned_is_a_failure_record():
    # [2, 1, 24] @ [2, 24, 1] is decomposed into pointwise code on CPU: nothing is benchmarked.
    p = Problem(op="bmm", m=1, n=1, k=24, batch=2, dtype="float32")
    with InductorCollector(hardware="cpu-test", device="cpu") as c:
        records, failures = c.measure(p)
    assert records == []
    assert len(failures) == 1 and failures[0].choice is None
    assert failures[0].reason == "no_valid_config" and failures[0].problem == p


def test_measure_needs_the_context():
    with pytest.raises(RuntimeError, match="with InductorCollector"):
        InductorCollector(hardware="x", device="cpu").measure(BMM)


@pytest.mark.parametrize(
    "problem",
    [
        Problem(op="mm", m=5, n=7, k=3, dtype="float32", stride_a=(1, 5), stride_b=(1, 3)),
        Problem(op="mm", m=5, n=7, k=3, dtype="bfloat16", stride_a=(8, 1)),  # padded rows
        Problem(op="addmm", m=4, n=6, k=3, dtype="float16"),
        Problem(op="addmm", m=4, n=6, k=3, dtype="float32", stride_bias=(6, 1)),
        Problem(op="bmm", m=4, n=6, k=3, batch=2, dtype="float32", stride_a=(12, 1, 4)),
        Problem(op="baddbmm", m=4, n=6, k=3, batch=2, dtype="float32"),
    ],
    ids=lambda p: p.key() + (f" bias{p.stride_bias}" if p.stride_bias else ""),
)
def test_inputs_realise_the_problem(problem):
    from torch_diode.collect.inductor import gemm_function

    inputs = make_inputs(problem, "cpu")
    *bias, a, b = inputs
    assert a.stride() == problem.stride_a and b.stride() == problem.stride_b
    assert a.dtype == getattr(torch, problem.dtype)
    out = gemm_function(problem.op)(*inputs)
    assert tuple(out.shape[-2:]) == (problem.m, problem.n)
    if bias:
        assert bias[0].dim() == (1 if problem.stride_bias[-2] == 0 else len(problem.stride_bias))


def test_linear_inputs_compute_the_same_gemm():
    from torch_diode.collect.inductor import gemm_function

    p = Problem(op="addmm", m=4, n=6, k=3, dtype="float32", stride_b=(1, 3))
    x, w, bias = make_inputs(p, "cpu", via_linear=True)
    assert w.shape == (6, 3) and w.t().stride() == p.stride_b
    torch.testing.assert_close(gemm_function("addmm", via_linear=True)(x, w, bias), torch.addmm(bias, x, w.t()))


def test_options_are_validated():
    with pytest.raises(ValueError, match="search_space"):
        InductorCollector(hardware="x", search_space="FULL")
    with pytest.raises(ValueError, match="mode"):
        InductorCollector(hardware="x", mode="default")


def test_a_cleared_saver_stops_the_run():
    # Another library calling clear_feedback_savers() would silently end recording: refuse to go on.
    from torch._inductor.select_algorithm import add_feedback_saver, clear_feedback_savers

    from torch_diode.errors import CollectionError

    with InductorCollector(hardware="cpu-test", device="cpu") as c:
        others = [fn for fn in _savers() if fn is not c.recorder]
        clear_feedback_savers()
        try:
            with pytest.raises(CollectionError, match="no longer registered"):
                c.measure(BMM)
        finally:
            for fn in others:
                add_feedback_saver(fn)
    assert _savers() == others


def test_measures_stock_inductor_with_a_model_registered(model_path):
    """The torch-diode meta-wheel registers a model at import, in the CLI and in every collect
    worker: the collector must still measure stock Inductor (the handler is not consulted)."""
    from torch_diode.inductor import install_diode_choices, installed_handler

    with install_diode_choices(model=str(model_path), device_types=("cpu",)) as handle:
        with InductorCollector(hardware="cpu-test", device="cpu") as collector:
            records, _ = collector.measure(BMM)
        assert installed_handler() is handle.handler  # installed again after the collection
    assert records and handle.get_stats()["calls"] == 0


def test_compiles_run_in_the_compile_workers_folders_and_still_benchmark():
    """The collector's compiles run in one set of new folders, those its compile workers were
    started in, whatever workers ran before it (Inductor's ``force_disable_caches`` gave each
    compile a folder of its own), no worker is left holding them after, and no cache stands in for
    a benchmark, the same problem measured twice included (Inductor's autotune counter: its
    feedback saver is called on a cached result too)."""
    import os
    from functools import partial

    from torch._dynamo.utils import counters
    from torch._inductor import config as inductor_config
    from torch._inductor.async_compile import AsyncCompile, shutdown_compile_workers
    from torch._inductor.custom_graph_pass import CustomGraphPass

    seen: list[tuple[str, str]] = []
    ask = partial(os.getenv, "TRITON_CACHE_DIR")

    class Look(CustomGraphPass):  # in each compile: the Triton folder here and in a compile worker
        def __call__(self, graph) -> None:
            seen.append((os.environ["TRITON_CACHE_DIR"], AsyncCompile.process_pool().submit(ask).result(timeout=300)))

        def uuid(self) -> str:  # a pass with a uuid leaves Inductor's FX graph cache usable
            return "look"

    overrides = {"compile_threads": 2, "post_grad_custom_post_pass": Look()}
    other = Problem(op="bmm", m=8, n=16, k=40, batch=3, dtype="float32")
    benchmarked = []
    try:
        with inductor_config.patch(compile_threads=2):
            AsyncCompile.process_pool()  # workers from before the collection, in other folders
            with InductorCollector(hardware="cpu-test", device="cpu", config_overrides=overrides) as collector:
                folder = os.environ["TRITON_CACHE_DIR"]
                runs = []
                for p in (BMM, other, BMM):
                    before = counters["inductor"]["select_algorithm_autotune"]
                    runs.append(collector.measure(p))
                    benchmarked.append(counters["inductor"]["select_algorithm_autotune"] - before)
            assert os.environ.get("TRITON_CACHE_DIR") != folder and not os.path.exists(folder)
            after = AsyncCompile.process_pool().submit(ask).result(timeout=300)
            assert after == os.environ.get("TRITON_CACHE_DIR")  # no worker kept the deleted folder
    finally:
        shutdown_compile_workers()
    assert seen == [(folder, folder)] * 3
    for (records, failures), p in zip(runs, (BMM, other, BMM)):
        assert failures == [] and [r.problem for r in records] == [p]
    assert benchmarked == [1, 1, 1]  # each compile benchmarked, the repeated problem too
