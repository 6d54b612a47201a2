"""Options of the choices handler, and a process-wide ``config`` object settable from the environment.

``DiodeOptions`` is what a handler runs with (frozen, validated). ``config`` holds the defaults that
``install_diode_choices()`` starts from: each field is read from its ``TORCH_DIODE_*`` environment
variable at access time unless it was set in code (``config.top_k_configs = 5``), so nothing
environment-dependent is baked in at import.

======================================  ==========================  ===========================
config field                            environment variable         ``DiodeOptions`` field
======================================  ==========================  ===========================
``model`` (path or registered name)     ``TORCH_DIODE_MODEL``        ``model``
``top_k_configs``                       ``TORCH_DIODE_TOP_K``        ``top_k_configs``
``performance_threshold``               ``TORCH_DIODE_PERFORMANCE_THRESHOLD``  ``performance_threshold``
``fallback_to_autotune``                ``TORCH_DIODE_FALLBACK_TO_AUTOTUNE``   ``enable_fallback``
``confidence_threshold``                ``TORCH_DIODE_CONFIDENCE_THRESHOLD``   ``confidence_threshold``
``cache_predictions``                   ``TORCH_DIODE_CACHE_PREDICTIONS``      ``cache_predictions``
``lut`` (kernel lookup table JSON)      ``TORCH_DIODE_LUT``          ``lut``
``search_space``                        ``TORCH_DIODE_SEARCH_SPACE`` ``search_space``
``device_types``                        ``TORCH_DIODE_DEVICE_TYPES`` ``device_types``
``max_compile_cost`` (``none`` = off)   ``TORCH_DIODE_MAX_COMPILE_COST``       ``max_compile_cost``
``diversity`` (0 = plain order)         ``TORCH_DIODE_DIVERSITY``    ``diversity``
``cliff_guard`` (0 = off)               ``TORCH_DIODE_CLIFF_GUARD``  ``cliff_guard``
``aten_alone_when_best``                ``TORCH_DIODE_ATEN_ALONE_WHEN_BEST``   ``aten_alone_when_best``
``aten_alone_below_us`` (0 = off)       ``TORCH_DIODE_ATEN_ALONE_BELOW_US``    ``aten_alone_below_us``
``one_below_us`` (0 = off)              ``TORCH_DIODE_ONE_BELOW_US``           ``one_below_us``
``disable`` (kill switch, per call)     ``TORCH_DIODE_DISABLE``      (checked by the handler)
======================================  ==========================  ===========================

A variable set to the empty string (or only spaces) counts as unset: the field keeps its default
(``TORCH_DIODE_FALLBACK_TO_AUTOTUNE=`` does not turn the fallback off; ``none`` or ``off`` turns
off the fields that can be off). A value out of its field's range is refused with the variable named.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from torch_diode._text import plural
from torch_diode.ranking import CLIFF_GUARD, DIVERSITY, check_min_num_warps, check_penalty

SEARCH_SPACES: tuple[str, ...] = ("EXHAUSTIVE", "DEFAULT")
#: Device types ``device_types`` accepts: torch's names of devices Inductor lowers GEMMs for.
DEVICE_TYPES: tuple[str, ...] = ("cuda", "cpu", "xpu", "mtia", "mps", "hpu")


@dataclass(frozen=True, kw_only=True)
class DiodeOptions:
    """How the choices handler selects kernels.

    Attributes:
        model: model file path or registered model name; ``None`` means LUT-only (``lut`` must be set).
        top_k_configs: Triton configs kept at most (an int >= 1), or a fraction in (0, 1) of the
            candidates, rounded up (never zero).
        performance_threshold: keep configs predicted within this factor of the best prediction (>= 1).
        enable_fallback: on any handler failure use Inductor's stock selection for that call
            (counted in the stats); False re-raises instead, for debugging (``fallback_to_autotune``).
        confidence_threshold: in [0, 1]. A prediction's confidence is ``exp(-std)`` (``std`` is the
            model's log-space uncertainty). When the best prediction's confidence is below this,
            the handler keeps twice ``top_k_configs`` and widens the threshold by ``exp(std)``; ATen
            is dropped only when its own confidence reaches it.
        cache_predictions: remember predictions per problem for the life of the handler.
        lut: path of a kernel lookup table (``torch_diode.lut``) whose exact hits win over the model.
        search_space: ``"EXHAUSTIVE"`` widens the Triton candidates to Inductor's exhaustive space
            for each GEMM (locally; the global config is untouched); ``"DEFAULT"`` scores only
            Inductor's default candidates.
        device_types: device types of GEMMs the handler acts on (others get stock behaviour).
        max_compile_cost: leave out of the widened candidates the Triton configs whose compile
            cost (``torch_diode.collect.sweep.compile_cost``: unrolled multiply-adds per thread,
            x8 for fp32 without TF32) exceeds this; ``None`` keeps every config. The default drops
            only the fp32 FMA tiles of 16,384+ multiply-adds per thread: each takes 13 s to minutes
            to compile (a cold-compile budget of ~1.5 s per GEMM cannot afford one), and the
            shipped models' training data leaves them out too. Inductor's own DEFAULT candidates
            are never dropped.
        diversity: how the kept Triton configs are ordered (``torch_diode.ranking``): each place
            after the first goes to the lowest predicted log time plus this much per better-placed
            config that differs from it only in ``num_stages`` (>= 0; 0: by prediction alone). The
            configs kept are the first ``top_k_configs`` of that order within ``performance_threshold``.
        cliff_guard: in that order, a one-warp Triton config's predicted log time counts this much
            more when an operand's rows are not 16-byte aligned (>= 0; 0: off): its scalar loads
            make such configs the model's worst misses (``torch_diode.ranking``).
        aten_alone_when_best: when the best prediction is an ATen choice and its confidence
            reaches ``confidence_threshold``, keep that ATen choice alone, so that Inductor lowers
            it without benchmarking (off by default). Inductor's autotuning times ATen's call
            20-45 us slower than it runs (an H200, torch 2.11: ``benchmarks/handler/session61.md``)
            and then picks, on GEMMs of a few microseconds, a Triton config 1.3-1.7x slower than
            the ATen kernel the model ranked first; the cost is the top-k benchmark's second
            chance where the model is wrong about ATen.
        aten_alone_below_us: the same as ``aten_alone_when_best`` where the best ATen choice is
            also predicted under this many microseconds (``None`` or 0: off; 50 by default since
            session 63). Inductor's timer handicaps ATen by 13-27 us on GEMMs under 50 us and by
            1-2 us above (``benchmarks/models/session62/timer-offsets-H200.txt``): on short GEMMs
            its benchmark passes over the faster ATen kernel, on long ones it can still correct
            the model. On an H200, where it changes what is kept, it made the compiled kernels
            0.922x as long (geomean, 24 validation problems, ``benchmarks/handler/session63.md``).
        one_below_us: where the best prediction, ATen or Triton, is confident and under this many
            microseconds, keep that one choice alone (a Triton best: the first of the model's
            order), so that Inductor lowers it without benchmarking (``None`` or 0: off; 20 by
            default since session 64). On short GEMMs Inductor's autotuning costs the most compile
            time per benchmarked choice (0.24-0.37 s on 5-20 us GEMMs against 0.03 s on a 190 us
            one; an H200, torch 2.11) and its timer is least trustworthy; the cost is the
            benchmark's second chance where the model is wrong. On an H200, on the 50 validation
            problems where it changes what is kept, the compiled kernels took 0.986x as long and
            the median cold compile went from 2.08 to 0.60 s (``benchmarks/handler/session64.md``).
        min_num_warps: leave out every Triton config with fewer warps than this, Inductor's own
            candidates included (``None`` or 1: off, the default). Opt-in protection against a
            compiler fault: Triton 3.6 miscompiles some one- and two-warp GEMM configs in fp16 and
            bf16 at exact sizes (wrong results, no error; an H200, session 70,
            ``benchmarks/handler/session70/PLAN.md``); 4 keeps none of that class. The cost: the
            fastest config has one or two warps on about a quarter of the validation problems
            (``diode validate-max-autotune --min-num-warps 4`` measures it for a model). Where no
            Triton config is left, the ATen choices stay alone; where no ATen choice is offered
            either, every config stays (counted as ``min_num_warps_unmet``), so the compile goes on.
            It holds where the handler falls back to stock autotuning too; GEMMs the handler does
            not act on (other ops or device types, ``disable``) are left to Inductor.
    """

    model: str | None = None
    top_k_configs: int | float = 3
    performance_threshold: float = 1.1
    enable_fallback: bool = True
    confidence_threshold: float = 0.8
    cache_predictions: bool = True
    lut: str | None = None
    search_space: str = "EXHAUSTIVE"
    device_types: tuple[str, ...] = ("cuda",)
    max_compile_cost: float | None = 131072.0
    diversity: float = DIVERSITY
    cliff_guard: float = CLIFF_GUARD
    aten_alone_when_best: bool = False
    aten_alone_below_us: float | None = 50.0
    one_below_us: float | None = 20.0
    min_num_warps: int | None = None

    def __post_init__(self) -> None:
        if self.model is not None:
            if isinstance(self.model, os.PathLike):
                object.__setattr__(self, "model", os.fspath(self.model))
            if not isinstance(self.model, str) or not self.model:
                raise TypeError(f"model: must be a file path or a registered model name, got {self.model!r}")
        if self.lut is not None:
            if isinstance(self.lut, os.PathLike):
                object.__setattr__(self, "lut", os.fspath(self.lut))
            if not isinstance(self.lut, str) or not self.lut:
                raise TypeError(f"lut: must be a file path, got {self.lut!r}")
        k = self.top_k_configs
        if isinstance(k, bool) or not isinstance(k, (int, float)):
            raise TypeError(f"top_k_configs: must be an int >= 1 or a fraction in (0, 1), got {k!r}")
        if isinstance(k, float) and k.is_integer() and k >= 1:
            object.__setattr__(self, "top_k_configs", int(k))
        elif not ((isinstance(k, int) and k >= 1) or (isinstance(k, float) and 0 < k < 1)):
            raise ValueError(f"top_k_configs: must be an int >= 1 or a fraction in (0, 1), got {k!r}")
        t = self.performance_threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 1:
            raise ValueError(f"performance_threshold: must be a finite number >= 1 (1.1 = within 10%), got {t!r}")
        object.__setattr__(self, "performance_threshold", float(t))
        c = self.confidence_threshold
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 <= c <= 1:
            raise ValueError(f"confidence_threshold: must be a number in [0, 1], got {c!r}")
        object.__setattr__(self, "confidence_threshold", float(c))
        for name in ("enable_fallback", "cache_predictions", "aten_alone_when_best"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name}: must be a bool, got {getattr(self, name)!r}")
        space = str(self.search_space).upper()
        if space not in SEARCH_SPACES:
            raise ValueError(f"search_space: must be one of {', '.join(SEARCH_SPACES)}, got {self.search_space!r}")
        object.__setattr__(self, "search_space", space)
        types = (self.device_types,) if isinstance(self.device_types, str) else tuple(self.device_types)
        if not types or not all(isinstance(t, str) and t.strip() for t in types):
            raise ValueError(f"device_types: must be non-empty device type names, got {self.device_types!r}")
        types = tuple(t.strip().lower() for t in types)  # torch's device types are lower case ('cuda')
        unknown = [t for t in types if t not in DEVICE_TYPES]
        if unknown:
            raise ValueError(
                f"device_types: {plural(len(unknown), 'unknown device type')} {', '.join(map(repr, unknown))}; known: {', '.join(DEVICE_TYPES)} "
                "(ROCm GPUs are 'cuda' too)"
            )
        object.__setattr__(self, "device_types", types)
        mc = self.max_compile_cost
        if mc is not None:
            if isinstance(mc, bool) or not isinstance(mc, (int, float)) or not mc > 0:
                raise ValueError(f"max_compile_cost: must be a positive number or None, got {mc!r}")
            object.__setattr__(self, "max_compile_cost", float(mc))
        for name in ("aten_alone_below_us", "one_below_us"):
            us = getattr(self, name)
            if us is not None:
                if isinstance(us, bool) or not isinstance(us, (int, float)) or not 0 <= us < math.inf:
                    raise ValueError(
                        f"{name}: must be a finite number of microseconds >= 0, or None (0 and None: off), got {us!r}"
                    )
                object.__setattr__(self, name, float(us))
        object.__setattr__(self, "min_num_warps", check_min_num_warps(self.min_num_warps))
        object.__setattr__(self, "diversity", check_penalty(self.diversity, "diversity"))
        object.__setattr__(self, "cliff_guard", check_penalty(self.cliff_guard, "cliff_guard"))

    def replace(self, **changes: Any) -> DiodeOptions:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["device_types"] = list(self.device_types)
        return d


OPTION_NAMES: frozenset[str] = frozenset(f.name for f in dataclasses.fields(DiodeOptions))

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse_bool(var: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{var}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


def _parse_top_k(var: str, raw: str) -> int | float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{var}={raw!r}: expected an integer >= 1 or a fraction in (0, 1)") from None
    return int(value) if value.is_integer() else value


def _parse_float(var: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{var}={raw!r}: expected a number") from None


def _parse_str(var: str, raw: str) -> str | None:
    return raw.strip() or None


def _parse_optional_float(var: str, raw: str) -> float | None:
    if raw.strip().lower() in ("none", "off"):
        return None
    return _parse_float(var, raw)


def _parse_optional_int(var: str, raw: str) -> int | None:
    if raw.strip().lower() in ("none", "off"):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{var}={raw!r}: expected an integer, or 'none'") from None


def _parse_types(var: str, raw: str) -> tuple[str, ...]:
    types = tuple(t.strip() for t in raw.split(",") if t.strip())
    if not types:
        raise ValueError(f"{var}={raw!r}: expected a comma-separated list of device types, e.g. 'cuda'")
    return types


@dataclass(frozen=True)
class _Field:
    env: str
    parse: Callable[[str, str], Any]
    option: str | None  # the DiodeOptions field it feeds (and takes its default from), if any

    @property
    def default(self) -> Any:
        return False if self.option is None else getattr(_DEFAULTS, self.option)


_DEFAULTS = DiodeOptions()
_FIELDS: dict[str, _Field] = {
    "model": _Field("TORCH_DIODE_MODEL", _parse_str, "model"),
    "top_k_configs": _Field("TORCH_DIODE_TOP_K", _parse_top_k, "top_k_configs"),
    "performance_threshold": _Field("TORCH_DIODE_PERFORMANCE_THRESHOLD", _parse_float, "performance_threshold"),
    "fallback_to_autotune": _Field("TORCH_DIODE_FALLBACK_TO_AUTOTUNE", _parse_bool, "enable_fallback"),
    "confidence_threshold": _Field("TORCH_DIODE_CONFIDENCE_THRESHOLD", _parse_float, "confidence_threshold"),
    "cache_predictions": _Field("TORCH_DIODE_CACHE_PREDICTIONS", _parse_bool, "cache_predictions"),
    "lut": _Field("TORCH_DIODE_LUT", _parse_str, "lut"),
    "search_space": _Field("TORCH_DIODE_SEARCH_SPACE", _parse_str, "search_space"),
    "device_types": _Field("TORCH_DIODE_DEVICE_TYPES", _parse_types, "device_types"),
    "max_compile_cost": _Field("TORCH_DIODE_MAX_COMPILE_COST", _parse_optional_float, "max_compile_cost"),
    "diversity": _Field("TORCH_DIODE_DIVERSITY", _parse_float, "diversity"),
    "cliff_guard": _Field("TORCH_DIODE_CLIFF_GUARD", _parse_float, "cliff_guard"),
    "aten_alone_when_best": _Field("TORCH_DIODE_ATEN_ALONE_WHEN_BEST", _parse_bool, "aten_alone_when_best"),
    "aten_alone_below_us": _Field("TORCH_DIODE_ATEN_ALONE_BELOW_US", _parse_optional_float, "aten_alone_below_us"),
    "one_below_us": _Field("TORCH_DIODE_ONE_BELOW_US", _parse_optional_float, "one_below_us"),
    "min_num_warps": _Field("TORCH_DIODE_MIN_NUM_WARPS", _parse_optional_int, "min_num_warps"),
    "disable": _Field("TORCH_DIODE_DISABLE", _parse_bool, None),  # default False: the handler is on
}


class DiodeConfig:
    """Process-wide defaults of the handler (see the module docstring for fields and variables).

    A field set in code wins over its environment variable; ``del config.field`` or
    :meth:`reset` goes back to the environment. A malformed variable raises ``ValueError``
    naming it when the field is read.
    """

    def __init__(self) -> None:
        object.__setattr__(self, "_overrides", {})

    def __getattr__(self, name: str) -> Any:
        field = _FIELDS.get(name)
        if field is None:
            raise AttributeError(f"torch_diode.config has no field {name!r}; fields: {', '.join(_FIELDS)}")
        overrides: dict[str, Any] = object.__getattribute__(self, "_overrides")
        if name in overrides:
            return overrides[name]
        raw = os.environ.get(field.env)
        if raw is None or not raw.strip():  # empty: unset (the default), for every variable alike
            return field.default
        return field.parse(field.env, raw)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"torch_diode.config has no field {name!r}; fields: {', '.join(_FIELDS)}")
        self._overrides[name] = value

    def __delattr__(self, name: str) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"torch_diode.config has no field {name!r}; fields: {', '.join(_FIELDS)}")
        self._overrides.pop(name, None)

    def __dir__(self) -> list[str]:
        return sorted(_FIELDS)

    def reset(self) -> None:
        """Forget every value set in code; fields follow the environment again."""
        self._overrides.clear()

    @contextlib.contextmanager
    def patch(self, **values: Any) -> Iterator[None]:
        """Set fields for the duration of a ``with`` block."""
        saved = dict(self._overrides)
        try:
            for name, value in values.items():
                setattr(self, name, value)
            yield
        finally:
            self._overrides.clear()
            self._overrides.update(saved)

    def options(self, **overrides: Any) -> DiodeOptions:
        """The current defaults as a validated :class:`DiodeOptions`, with ``overrides`` applied.

        An override of ``None`` keeps the configured value.

        Raises:
            TypeError: an override is not a ``DiodeOptions`` field.
            ValueError: a value (from code or the environment) is invalid.
        """
        unknown = set(overrides) - OPTION_NAMES
        if unknown:
            raise TypeError(
                f"{plural(len(unknown), 'unknown option')} {sorted(unknown)}; options: {', '.join(sorted(OPTION_NAMES))}"
            )
        kwargs: dict[str, Any] = {}
        for name, field in _FIELDS.items():
            if field.option is not None:
                kwargs[field.option] = getattr(self, name)
        given = {k: v for k, v in overrides.items() if v is not None}
        kwargs.update(given)
        try:
            return DiodeOptions(**kwargs)
        except (ValueError, TypeError) as exc:
            # a value from the environment out of range: name the variable, as a parse error does
            option = str(exc).split(":", 1)[0]
            for name, field in _FIELDS.items():
                raw = os.environ.get(field.env)
                if field.option == option and option not in given and name not in self._overrides and raw:
                    raise type(exc)(f"{field.env}={raw!r}: {exc}") from None
            raise


#: The process-wide defaults. ``import torch_diode.config`` reads nothing until a field is read.
config = DiodeConfig()
