"""torch_diode.config: DiodeOptions validation and the environment-backed config object."""

from __future__ import annotations

import numpy as np
import pytest

from torch_diode.config import DiodeConfig, DiodeOptions


def test_defaults() -> None:
    o = DiodeOptions()
    assert (o.top_k_configs, o.performance_threshold, o.enable_fallback, o.cache_predictions) == (3, 1.1, True, True)
    assert (o.search_space, o.device_types, o.model, o.lut) == ("EXHAUSTIVE", ("cuda",), None, None)
    assert (o.aten_alone_when_best, o.aten_alone_below_us, o.one_below_us) == (False, 50.0, 20.0)
    assert o.min_num_warps is None


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("top_k_configs", 0, ValueError),
        ("top_k_configs", 1.5, ValueError),
        ("top_k_configs", True, TypeError),
        ("performance_threshold", 0.9, ValueError),
        ("performance_threshold", float("inf"), ValueError),
        ("confidence_threshold", 1.5, ValueError),
        ("enable_fallback", "yes", TypeError),
        ("search_space", "FAST", ValueError),
        ("device_types", (), ValueError),
        ("device_types", ("cuda", "gpu"), ValueError),
        ("device_types", (" ",), ValueError),
        ("model", 3, TypeError),
        ("aten_alone_below_us", -1.0, ValueError),
        ("aten_alone_below_us", float("inf"), ValueError),
        ("aten_alone_below_us", True, ValueError),
        ("aten_alone_below_us", "50", ValueError),
        ("one_below_us", -1.0, ValueError),
        ("one_below_us", float("nan"), ValueError),
        ("one_below_us", False, ValueError),
        ("min_num_warps", 0, ValueError),
        ("min_num_warps", -4, ValueError),
        ("min_num_warps", 2.5, ValueError),
        ("min_num_warps", True, ValueError),
        ("min_num_warps", "4", ValueError),
        ("min_num_warps", np.array(4.0), ValueError),
        ("min_num_warps", np.array([4, 8]), ValueError),
    ],
    ids=lambda v: repr(v),
)
def test_invalid_options_are_refused(field: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        DiodeOptions(**{field: value})


def test_normalisation() -> None:
    o = DiodeOptions(top_k_configs=4.0, search_space="exhaustive", device_types="cuda")
    assert (o.top_k_configs, o.search_space, o.device_types) == (4, "EXHAUSTIVE", ("cuda",))
    assert DiodeOptions(device_types=("CUDA", " Cpu")).device_types == ("cuda", "cpu")  # as torch names them
    assert DiodeOptions(top_k_configs=0.25).top_k_configs == 0.25
    # min_num_warps: 1 leaves nothing out, the same as off; 4.0 is the integer 4
    assert DiodeOptions(min_num_warps=1).min_num_warps is None and DiodeOptions(min_num_warps=4.0).min_num_warps == 4
    assert type(DiodeOptions(min_num_warps=np.int64(4)).min_num_warps) is int  # a numpy integer: a plain int
    assert o.replace(top_k_configs=5).top_k_configs == 5
    assert DiodeOptions(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in o.to_dict().items()}) == o


def test_environment_is_read_at_access_time(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = DiodeConfig()
    assert cfg.top_k_configs == 3 and cfg.fallback_to_autotune is True and cfg.disable is False
    monkeypatch.setenv("TORCH_DIODE_TOP_K", "5")
    monkeypatch.setenv("TORCH_DIODE_PERFORMANCE_THRESHOLD", "1.25")
    monkeypatch.setenv("TORCH_DIODE_FALLBACK_TO_AUTOTUNE", "0")
    monkeypatch.setenv("TORCH_DIODE_CONFIDENCE_THRESHOLD", "0.5")
    monkeypatch.setenv("TORCH_DIODE_CACHE_PREDICTIONS", "false")
    monkeypatch.setenv("TORCH_DIODE_MODEL", "NVIDIA-H100-matmul")
    monkeypatch.setenv("TORCH_DIODE_DEVICE_TYPES", "cuda, xpu")
    monkeypatch.setenv("TORCH_DIODE_DISABLE", "yes")
    monkeypatch.setenv("TORCH_DIODE_ATEN_ALONE_BELOW_US", "40")
    monkeypatch.setenv("TORCH_DIODE_ONE_BELOW_US", "20")
    monkeypatch.setenv("TORCH_DIODE_MIN_NUM_WARPS", "4")
    o = cfg.options()
    assert (o.aten_alone_below_us, o.one_below_us, o.min_num_warps) == (40.0, 20.0, 4)
    assert (o.top_k_configs, o.performance_threshold, o.enable_fallback) == (5, 1.25, False)
    assert (o.confidence_threshold, o.cache_predictions, o.model) == (0.5, False, "NVIDIA-H100-matmul")
    assert o.device_types == ("cuda", "xpu") and cfg.disable is True
    # set in code wins over the environment; del goes back to it
    cfg.top_k_configs = 2
    assert cfg.options().top_k_configs == 2
    del cfg.top_k_configs
    assert cfg.top_k_configs == 5
    with cfg.patch(performance_threshold=1.05):
        assert cfg.options(top_k_configs=7).performance_threshold == 1.05
    assert cfg.performance_threshold == 1.25


def test_malformed_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_DIODE_TOP_K", "many")
    with pytest.raises(ValueError, match="TORCH_DIODE_TOP_K='many'"):
        DiodeConfig().options()
    monkeypatch.setenv("TORCH_DIODE_DISABLE", "maybe")
    with pytest.raises(ValueError, match="TORCH_DIODE_DISABLE"):
        _ = DiodeConfig().disable
    monkeypatch.setenv("TORCH_DIODE_ATEN_ALONE_BELOW_US", "short")
    with pytest.raises(ValueError, match="TORCH_DIODE_ATEN_ALONE_BELOW_US='short': expected a number"):
        _ = DiodeConfig().aten_alone_below_us
    monkeypatch.setenv("TORCH_DIODE_ATEN_ALONE_BELOW_US", "off")
    assert DiodeConfig().aten_alone_below_us is None
    monkeypatch.setenv("TORCH_DIODE_MIN_NUM_WARPS", "four")
    with pytest.raises(ValueError, match="TORCH_DIODE_MIN_NUM_WARPS='four': expected an integer"):
        _ = DiodeConfig().min_num_warps
    monkeypatch.setenv("TORCH_DIODE_MIN_NUM_WARPS", "0")
    monkeypatch.delenv("TORCH_DIODE_TOP_K")
    with pytest.raises(ValueError, match="min_num_warps: must be an integer >= 1"):
        DiodeConfig().options()
    monkeypatch.setenv("TORCH_DIODE_MIN_NUM_WARPS", "none")
    assert DiodeConfig().options().min_num_warps is None


@pytest.mark.parametrize(
    ("var", "value", "option"),
    [
        ("TORCH_DIODE_TOP_K", "-1", "top_k_configs"),
        ("TORCH_DIODE_PERFORMANCE_THRESHOLD", "0.5", "performance_threshold"),
        ("TORCH_DIODE_DIVERSITY", "-1", "diversity"),
        ("TORCH_DIODE_MIN_NUM_WARPS", "0", "min_num_warps"),
        ("TORCH_DIODE_DEVICE_TYPES", "gpu", "device_types"),
        ("TORCH_DIODE_SEARCH_SPACE", "FAST", "search_space"),
    ],
)
def test_a_value_out_of_range_names_its_variable(monkeypatch: pytest.MonkeyPatch, var, value, option) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=f"^{var}='{value}': {option}: "):
        DiodeConfig().options()
    # the same value given in the call is the caller's error: the variable is not named
    from torch_diode.config import _FIELDS

    parsed = getattr(DiodeConfig(), next(n for n, f in _FIELDS.items() if f.option == option))
    with pytest.raises(ValueError, match=f"^{option}: "):
        DiodeConfig().options(**{option: parsed})


def test_an_empty_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty variable keeps the field's default, for every variable alike (before session 78 an
    empty TORCH_DIODE_FALLBACK_TO_AUTOTUNE turned the fallback off and an empty
    TORCH_DIODE_MAX_COMPILE_COST the compile-cost filter, while an empty TORCH_DIODE_TOP_K raised)."""
    from torch_diode.config import _FIELDS

    for field in _FIELDS.values():
        monkeypatch.setenv(field.env, "  ")
    cfg = DiodeConfig()
    assert cfg.options() == DiodeOptions() and cfg.disable is False and cfg.model is None


def test_unknown_names_are_refused() -> None:
    cfg = DiodeConfig()
    with pytest.raises(AttributeError, match="fields: model"):
        cfg.topk = 3
    with pytest.raises(TypeError, match="unknown option"):
        cfg.options(topk=3)
