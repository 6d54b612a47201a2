# ruff: noqa: F811  (pytest fixtures imported from test_inductor_helpers are redefined as arguments)
"""install/uninstall: process-wide (every thread, later threads too), idempotent, restorable,
FX-graph-cache key, torch-version gating, and full torch.compile runs on CPU with the handler."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from test_inductor_helpers import SHIPPED_H100, corrupt_copy, diode_dataset, model_path  # noqa: F401  (fixtures)
from torch._inductor import config as inductor_config
from torch._inductor.choices import InductorChoices
from torch._inductor.virtualized import V

from torch_diode.dataset import Dataset
from torch_diode.inductor import compat
from torch_diode.inductor.choices import DiodeInductorChoices
from torch_diode.inductor.install import (
    DiodeChoicesFactory,
    create_diode_choices,
    install_diode_choices,
    installed_handler,
    uninstall_diode_choices,
)
from torch_diode.lut import KernelLUT
from torch_diode.records import Choice, Problem, Provenance, TimingRecord


@pytest.fixture(autouse=True)
def clean_install() -> Iterator[None]:
    uninstall_diode_choices()
    yield
    uninstall_diode_choices()


def in_new_thread(fn: Any) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_install_reaches_this_thread_and_later_threads(model_path: Path) -> None:
    started_before = threading.Event()
    seen_by_early_thread: list[Any] = []
    go = threading.Event()

    def early() -> None:  # started before the install, first looks at V.choices after it
        started_before.set()
        go.wait(120)  # until the install has returned (loading the model can take seconds when loaded)
        seen_by_early_thread.append(V.choices)

    t = threading.Thread(target=early)
    t.start()
    started_before.wait(10)
    handle = install_diode_choices(model=str(model_path))
    go.set()
    t.join()
    h = handle.handler
    assert handle.installed and isinstance(h, DiodeInductorChoices)
    assert V.choices is h and installed_handler() is h
    assert in_new_thread(lambda: V.choices) is h
    assert seen_by_early_thread == [h]
    handle.uninstall()
    assert type(V.choices) is InductorChoices
    assert type(in_new_thread(lambda: V.choices)) is InductorChoices
    assert installed_handler() is None and not h._active


def test_context_manager_restores_a_previous_thread_handler(model_path: Path) -> None:
    mine = InductorChoices()
    with V.set_choices_handler(mine):
        before_cls = inductor_config.inductor_choices_class
        with install_diode_choices(model=str(model_path)) as handle:
            assert V.choices is handle.handler
            assert isinstance(inductor_config.inductor_choices_class, DiodeChoicesFactory)
        assert V.choices is mine
        assert inductor_config.inductor_choices_class is before_cls


def test_uninstall_leaves_a_handler_the_user_set_after_the_install(model_path: Path) -> None:
    """Only what torch-diode replaced is put back: a thread handler or a choices class the user
    set while torch-diode was installed stays when it is uninstalled."""
    handle = install_diode_choices(model=str(model_path))
    mine = InductorChoices()
    factory = object()  # stands for a user's own config.inductor_choices_class
    V.set_choices_handler(mine)  # set for good (not a with block), as a user's code may
    inductor_config.inductor_choices_class = factory
    try:
        handle.uninstall()
        assert inductor_config.inductor_choices_class is factory and V.choices is mine
    finally:
        inductor_config.inductor_choices_class = None
        delattr(compat.thread_local_store(), compat.choices_virtual()._key)
    assert installed_handler() is None and type(V.choices) is InductorChoices


def test_idempotent_and_replacing(model_path: Path) -> None:
    first = install_diode_choices(model=str(model_path), top_k_configs=2)
    assert first.handler._get_model() is not None  # loaded at the install
    same = install_diode_choices(model=str(model_path), top_k_configs=2)
    assert same.handler is first.handler
    same.uninstall()  # an idempotent re-install owns nothing
    assert installed_handler() is first.handler
    other = install_diode_choices(model=str(model_path), top_k_configs=5)
    assert V.choices is other.handler and not first.handler._active
    assert in_new_thread(lambda: V.choices) is other.handler
    other.uninstall()  # back to the first install
    assert V.choices is first.handler and first.handler._active
    assert uninstall_diode_choices() is True
    assert uninstall_diode_choices() is False
    assert type(V.choices) is InductorChoices


def test_a_taken_over_install_is_removed_by_either_handle_and_the_other_says_so(model_path: Path) -> None:
    """take_over (what register_model does with an equal handler installed by hand): the new handle
    owns the install too, so the registry can remove it (before, its handle owned nothing and the
    next registration stacked over it); the hand install's handle then removes nothing, and warns
    at the caller's line rather than leave them believing it restored their state."""
    from torch_diode.inductor.install import take_over

    with pytest.raises(TypeError, match="expected the DiodeHandle install_diode_choices returned, got str"):
        take_over("handle", by="register_model('x')")  # type: ignore[arg-type]
    mine = install_diode_choices(model=str(model_path))
    assert take_over(mine, by="register_model('x')") is mine  # it owns its install: nothing to take over
    taken = take_over(install_diode_choices(model=str(model_path)), by="register_model('x')")
    assert taken.handler is mine.handler and taken.uninstall() is True and installed_handler() is None
    with pytest.warns(RuntimeWarning, match=r"taken over by register_model\('x'\)") as caught:
        assert mine.uninstall() is False
    assert [w.filename for w in caught] == [__file__]
    with pytest.warns(RuntimeWarning, match="nothing was uninstalled now") as caught:
        with install_diode_choices(model=str(model_path)) as mine:
            take_over(install_diode_choices(model=str(model_path)), by="register_model('x')").uninstall()
    assert [w.filename for w in caught] == [__file__]
    # the hand install's handle first: it removes it, and the taken-over handle then removes nothing, quietly
    mine = install_diode_choices(model=str(model_path))
    taken = take_over(install_diode_choices(model=str(model_path)), by="register_model('x')")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mine.uninstall() is True and taken.uninstall() is False
    assert installed_handler() is None


def test_fx_graph_cache_key_carries_the_uuid(model_path: Path) -> None:
    with install_diode_choices(model=str(model_path)) as handle:
        if compat.choices_factory_needs_uuid():
            portable = inductor_config.save_config_portable()
            assert portable["inductor_choices_class"] == handle.handler.uuid()
        factory = inductor_config.inductor_choices_class
        assert factory() is handle.handler and factory.uuid() == handle.handler.uuid()


def test_unsupported_torch_warns_once_and_installs_nothing(monkeypatch: pytest.MonkeyPatch, model_path: Path) -> None:
    import torch_diode.inductor.install as install_mod

    monkeypatch.setattr(torch, "__version__", "2.9.1+cu128")
    monkeypatch.setattr(install_mod, "_warned_unsupported", False)
    with pytest.warns(RuntimeWarning, match=r"torch 2.9 is too old .* >= 2.10"):
        handle = install_diode_choices(model=str(model_path))
    assert not handle.installed and handle.handler is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not install_diode_choices(model=str(model_path)).installed  # no second warning
    assert installed_handler() is None and type(V.choices) is InductorChoices
    with pytest.raises(RuntimeError, match="too old"):
        create_diode_choices(model=str(model_path))


def test_version_adapters() -> None:
    assert compat.parse_torch_version("2.13.0+cpu") == (2, 13)
    assert compat.parse_torch_version("2.14.0.dev20260101+cu130") == (2, 14)
    assert compat.parse_torch_version("2.10.0a0+git1234") == (2, 10)
    with pytest.raises(ValueError, match="cannot parse"):
        compat.parse_torch_version("nightly")
    assert compat.unsupported_reason((2, 9)) is not None and compat.unsupported_reason((2, 10)) is None
    assert [compat.feedback_saver_arity(v) for v in ((2, 10), (2, 11), (2, 14))] == [5, 6, 6]
    assert [compat.config_is_thread_local(v) for v in ((2, 11), (2, 12))] == [False, True]
    assert compat.choices_factory_needs_uuid((2, 12)) and not compat.choices_factory_needs_uuid((2, 11))
    assert hasattr(compat.template_heuristics_module("params"), "DictKernelTemplateParams")


def test_disable_env_installs_nothing(monkeypatch: pytest.MonkeyPatch, model_path: Path) -> None:
    monkeypatch.setenv("TORCH_DIODE_DISABLE", "1")
    assert not install_diode_choices(model=str(model_path)).installed


def test_bad_options_are_refused_before_anything_changes(model_path: Path) -> None:
    with pytest.raises(TypeError, match="unknown option"):
        install_diode_choices(model=str(model_path), topk=3)
    with pytest.raises(ValueError, match="performance_threshold"):
        install_diode_choices(model=str(model_path), performance_threshold=0.5)
    assert installed_handler() is None


def test_a_model_or_table_that_cannot_be_used_is_refused_at_install(model_path: Path, tmp_path: Path) -> None:
    """Not at the first GEMM, where it could only make each compile fall back to stock autotuning."""
    from torch_diode.errors import DatasetFormatError, ModelFormatError, ModelNotFoundError

    corrupt = corrupt_copy(model_path, tmp_path / "corrupt.safetensors")
    before = V.choices
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        install_diode_choices(model=str(tmp_path / "missing.safetensors"))
    with pytest.raises(ModelNotFoundError, match="no-such-model"):
        install_diode_choices(model="no-such-model")
    with pytest.raises(ModelFormatError):
        install_diode_choices(model=str(corrupt))
    with pytest.raises(ModelFormatError):
        create_diode_choices(model=str(corrupt))
    with pytest.raises(DatasetFormatError, match="no such file"):
        install_diode_choices(model=str(model_path), lut=str(tmp_path / "missing-lut.json"))
    assert installed_handler() is None and V.choices is before
    with install_diode_choices(model=str(model_path)) as handle:  # loaded once, here: the first GEMM finds it
        assert handle.handler._model is not None and handle.handler._model.model_hash == handle.handler.model_hash()


def test_installing_by_name_beside_a_registration_does_not_deadlock() -> None:
    """The installer loads its model outside its lock: resolving a registered name takes the
    registry's lock, which ``register_model`` holds while it installs, so loading under the
    installer's lock deadlocked the two (and then every compiling thread, which takes the
    installer's lock for its handler). In a fresh interpreter: a deadlock cannot hang this suite."""
    import os
    import subprocess
    import sys

    code = """
import threading, time
from torch_diode import registry
from torch_diode.inductor import install
from torch_diode.inductor.choices import DiodeInductorChoices  # imports Inductor now, not in the race
registry.get_model_entry("NVIDIA-H100-matmul")
holding = threading.Event()
def registration_in_progress():  # as register_model does: the registry's lock, then the installer's
    with registry._lock:
        holding.set()
        time.sleep(1.0)  # meanwhile the other thread installs by name
        with install._lock:
            pass
t = threading.Thread(target=registration_in_progress, daemon=True)
t.start()
holding.wait()
u = threading.Thread(target=lambda: install.install_diode_choices(model="NVIDIA-H100-matmul"), daemon=True)
u.start()
t.join(15)
u.join(15)
print("still running:", t.is_alive(), u.is_alive(), flush=True)
if not (t.is_alive() or u.is_alive()):  # else the installer's lock is held for good: asking would hang
    print("installed:", install.installed_handler() is not None)
"""
    env = {**os.environ, "TORCH_DIODE_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-2:] == ["still running: False False", "installed: True"], (
        proc.stdout + proc.stderr
    )


def test_installing_the_installed_handler_again_reads_no_file(model_path: Path, tmp_path: Path) -> None:
    """An install equal to the current one returns it before any loading: the file is not read again
    (it may even be gone: the installed handler holds its model)."""
    import shutil

    from torch_diode.errors import ModelNotFoundError

    copy = tmp_path / "copy.safetensors"
    shutil.copy(model_path, copy)
    with install_diode_choices(model=str(copy), top_k_configs=2) as first:
        copy.unlink()
        again = install_diode_choices(model=str(copy), top_k_configs=2)
        assert again.handler is first.handler
        with pytest.raises(ModelNotFoundError):
            install_diode_choices(model=str(copy), top_k_configs=3)  # another handler: loaded, and refused
        assert installed_handler() is first.handler


# -- full torch.compile on CPU ------------------------------------------------------------------


def _compile_and_check(fn: Any, *args: torch.Tensor) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    torch.testing.assert_close(compiled(*args), fn(*args))


def _three_gemms(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> Any:
    return a @ b, torch.addmm(bias, a, b), torch.bmm(x, y)


def test_compile_cpp_backend_hook_sees_aten_only(model_path: Path) -> None:
    """Default CPU route (cpp backend): the hook is called for every GEMM with ATen only."""
    args = (torch.randn(64, 128), torch.randn(128, 32), torch.randn(32), torch.randn(3, 16, 24), torch.randn(3, 24, 8))
    with install_diode_choices(model=str(model_path), device_types=("cuda", "cpu")) as handle:
        with inductor_config.patch(force_disable_caches=True):
            _compile_and_check(_three_gemms, *args)
    s = handle.get_stats()
    assert s["calls"] >= 3 and s["fallbacks_total"] == 0
    assert s["passthrough"].get("no_triton_candidates", 0) >= 3


def test_compile_with_a_mode_and_a_loaded_model_object(model_path: Path) -> None:
    """torch.compile(mode=...) deep-copies Inductor's config, which holds the installed handler:
    a handler given a loaded model object (no path) must survive that, stay the same handler
    (its stats count the calls) and compile correctly. (diode bench's first GPU run failed here.)"""
    from torch_diode.model import load_model

    args = (torch.randn(64, 128), torch.randn(128, 32), torch.randn(32), torch.randn(3, 16, 24), torch.randn(3, 24, 8))
    with install_diode_choices(model=load_model(model_path), device_types=("cuda", "cpu")) as handle:
        with inductor_config.patch(force_disable_caches=True):
            torch._dynamo.reset()
            compiled = torch.compile(_three_gemms, mode="max-autotune-no-cudagraphs")
            torch.testing.assert_close(compiled(*args), _three_gemms(*args))
    assert handle.get_stats()["calls"] >= 3


def test_compile_addmm_with_a_broadcast_bias_keeps_one_aten_variant() -> None:
    """A real max-autotune compile (torch 2.13 on CPU: addmm's ATen call holds ``aten::addmm``
    and ``aten::bias_addmm`` on a 2-D bias broadcast along rows; its Triton call holds none
    here): with the shipped H100 model the handler keeps the variant it predicts faster, so
    Inductor benchmarks nothing, and the result equals eager's."""
    x, w, bias = (torch.randn(s, dtype=torch.float16) for s in ((512, 256), (128, 256), (128,)))

    def linear_2d_bias(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.addmm(bias.expand(x.shape[0], -1), x, w.t())

    with install_diode_choices(model=str(SHIPPED_H100), device_types=("cpu",)) as handle:
        with inductor_config.patch(force_disable_caches=True, max_autotune=True):
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(linear_2d_bias)(x, w, bias), linear_2d_bias(x, w, bias))
    s = handle.get_stats()  # counted at addmm's last hook call (its Triton templates': none on CPU)
    assert (s["aten_kept"], s["aten_dropped"], s["single_choice"], s["fallbacks_total"]) == (1, 1, 1, 0)
    # a handler for CUDA GEMMs only leaves this CPU GEMM alone, and counts nothing of it
    with install_diode_choices(model=str(SHIPPED_H100)) as handle:
        with inductor_config.patch(force_disable_caches=True, max_autotune=True):
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(linear_2d_bias)(x, w, bias), linear_2d_bias(x, w, bias))
    s = handle.get_stats()
    assert (s["aten_kept"], s["aten_dropped"], s["single_choice"], s["candidates_seen"]) == (0, 0, 0, 0)
    assert s["passthrough"].get("device_type") == 1


def test_compile_with_dynamic_sizes_selects_at_the_hints_and_runs_at_every_size() -> None:
    """A real max-autotune compile with ``dynamic=True`` (one graph for every size): addmm's
    lowering reaches the handler with symbolic sizes, which selects between its ATen variants at
    the first call's sizes (the hints) without a fallback; the compiled function equals eager at
    every size it is then called with, bmm and mm beside it."""
    w, bias = torch.randn(128, 256, dtype=torch.float16), torch.randn(128, dtype=torch.float16)

    def layers(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.addmm(bias.expand(x.shape[0], -1), x, w.t()), x @ w.t(), torch.bmm(y, z)

    with install_diode_choices(model=str(SHIPPED_H100), device_types=("cpu",)) as handle:
        with inductor_config.patch(force_disable_caches=True, max_autotune=True):
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()
            compiled = torch.compile(layers, dynamic=True)
            for m in (512, 37, 1000):
                args = (torch.randn(m, 256), torch.randn(3, m, 40), torch.randn(3, 40, m + 1))
                args = tuple(a.to(torch.float16) for a in args)
                for got, want in zip(compiled(*args), layers(*args)):
                    torch.testing.assert_close(got, want)
            assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    s = handle.get_stats()
    assert (s["aten_kept"], s["aten_dropped"], s["single_choice"], s["fallbacks_total"]) == (1, 1, 1, 0)


def test_compile_in_a_thread_started_after_install_uses_the_handler(model_path: Path) -> None:
    args = (torch.randn(32, 48), torch.randn(48, 16), torch.randn(16), torch.randn(2, 8, 12), torch.randn(2, 12, 4))
    with install_diode_choices(model=str(model_path), device_types=("cuda", "cpu")) as handle:

        def work() -> int:
            with inductor_config.patch(force_disable_caches=True):  # per thread on torch >= 2.12
                _compile_and_check(_three_gemms, *args)
            return 0

        in_new_thread(work)
    assert handle.get_stats()["calls"] >= 3


def test_compile_triton_cpu_route_takes_the_lut_choice(tmp_path: Path, model_path: Path) -> None:
    """cpu_backend="triton": the hook gets the real Triton candidates (exhaustive CPU space); the
    table says ATen is best, so no Triton kernel is returned (none could run here: Triton has no
    CPU driver in this environment) and the compiled result is correct."""
    a, b = torch.randn(64, 128), torch.randn(128, 32)
    problem = Problem(op="mm", m=64, n=32, k=128, dtype="float32")
    lut = KernelLUT.from_dataset(
        Dataset.from_records(
            [TimingRecord(problem=problem, choice=Choice.aten("mm"), time_us=3.0, hardware="NVIDIA-H100")],
            Provenance(hardware="NVIDIA-H100"),
        ),
        top_k=1,
    )
    lut_path = lut.save(tmp_path / "lut.json")
    with install_diode_choices(model=str(model_path), lut=str(lut_path), device_types=("cpu",)) as handle:
        with inductor_config.patch(max_autotune=True, force_disable_caches=True, cpu_backend="triton"):
            _compile_and_check(lambda a, b: a @ b, a, b)
    s = handle.get_stats()
    assert s["lut_hits"] == 1 and s["gemm_calls"] == 1 and s["fallbacks_total"] == 0
    assert s["candidates_seen"] > 100  # the exhaustive Triton space was enumerated and scored
    assert s["aten_kept"] == 1 and s["candidates_kept"] == 1


@pytest.fixture(scope="module")
def aten_wins_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real model trained on real Inductor CPU-Triton candidates where ATen is always 50x faster."""
    from test_inductor_helpers import HARDWARE, inductor_graph, kernel_inputs, stock_ktcs

    from torch_diode.inductor.convert import choice_from_ktc, problem_from_kernel_inputs
    from torch_diode.model import save_model
    from torch_diode.train import TrainOptions, train

    records = []
    with inductor_graph(cpu_backend="triton"):
        for m, n, k in [(64, 32, 128), (128, 64, 256), (32, 32, 64), (256, 128, 128), (64, 64, 64), (96, 48, 160)]:
            ki = kernel_inputs("mm", m, n, k, dtype=torch.float32, device="cpu")
            p = problem_from_kernel_inputs(ki, "mm")
            for c in {choice_from_ktc(x) for xs in stock_ktcs(ki, "mm").values() for x in xs}:
                t = 1.0 if c.is_aten else 50.0 + (c.block_m or 0) / 10
                records.append(TimingRecord(problem=p, choice=c, time_us=t, hardware=HARDWARE))
    ds = Dataset.from_records(records, Provenance(hardware=HARDWARE))
    model, _ = train(
        ds, TrainOptions(model_type="base", num_epochs=40, patience=40, seed=0, progress=False, num_threads=1)
    )
    return save_model(model, tmp_path_factory.mktemp("aten") / "aten-wins.safetensors")


def test_compile_triton_cpu_route_model_drops_every_triton_config(aten_wins_model: Path) -> None:
    """cpu_backend="triton" with the model deciding: it scores the real Triton candidates and ATen
    in one call, is confident ATen wins, returns no Triton config, and the compile is correct."""
    a, b = torch.randn(64, 128), torch.randn(128, 32)
    opts = {"device_types": ("cpu",), "confidence_threshold": 0.3}
    with install_diode_choices(model=str(aten_wins_model), **opts) as handle:
        with inductor_config.patch(max_autotune=True, force_disable_caches=True, cpu_backend="triton"):
            _compile_and_check(lambda a, b: a @ b, a, b)
    s = handle.get_stats()
    assert s["model_selections"] == 1 and s["fallbacks_total"] == 0 and s["candidates_seen"] > 100
    assert s["aten_kept"] == 1 and s["candidates_kept"] == 1


def test_stock_inductor_takes_every_handler_out_and_back(model_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A model registered in the process (the meta-wheel registers one at import) must not change
    what a stock measurement records: inside ``stock_inductor`` no handler is consulted; after it
    the same handlers are installed again, in the same order."""
    from torch_diode.inductor import stock_inductor

    args = (torch.randn(64, 128), torch.randn(128, 32), torch.randn(32), torch.randn(3, 16, 24), torch.randn(3, 24, 8))
    first = install_diode_choices(model=str(model_path), device_types=("cuda", "cpu"))
    second = install_diode_choices(model=str(model_path), device_types=("cuda", "cpu"), top_k_configs=2)
    try:
        with inductor_config.patch(force_disable_caches=True):
            with stock_inductor():
                assert installed_handler() is None and type(V.choices) is InductorChoices
                _compile_and_check(_three_gemms, *args)
            assert second.get_stats()["calls"] == 0 and first.get_stats()["calls"] == 0
            assert installed_handler() is second.handler and second.handler._active and not first.handler._active
            _compile_and_check(_three_gemms, *args)
            assert second.get_stats()["calls"] >= 3
            second.uninstall()
            assert installed_handler() is first.handler and first.handler._active
            # an install during the block is left in place (and the handlers taken out stay out)
            with stock_inductor():
                third = install_diode_choices(model=str(model_path), device_types=("cpu",))
            assert installed_handler() is third.handler
            assert "was not installed again" in caplog.text
            third.uninstall()
            assert installed_handler() is None
    finally:
        uninstall_diode_choices()


def test_a_relative_model_path_survives_a_chdir(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compile subprocess (``TORCHINDUCTOR_FX_COMPILE_MODE=subprocess``) gets the handler pickled,
    options only, and loads the model again: a relative path given to the installer or to
    ``register_model`` must still name that file after the program changes directory."""
    import pickle

    from torch_diode.registry import current_registration, register_model

    monkeypatch.chdir(model_path.parent)
    with install_diode_choices(model=model_path.name) as handle:
        registration = register_model(model_path.name)  # takes the hand install over
        monkeypatch.chdir(tmp_path)
        for handler in (handle.handler, registration.handle.handler):
            assert pickle.loads(pickle.dumps(handler))._get_model() is not None
    assert current_registration() is None  # the hand install's exit removed it, the registration with it
