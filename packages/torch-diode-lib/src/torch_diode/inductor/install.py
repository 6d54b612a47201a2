"""Install torch-diode's choices handler into Inductor, process-wide, and take it out again.

What :func:`install_diode_choices` changes (each change is logged at INFO, and undone by
:func:`uninstall_diode_choices` or by leaving the returned handle's ``with`` block):

1. ``torch._inductor.virtualized._choices._default``: the factory Inductor calls in any thread
   that has no handler of its own. It is replaced by one that returns the installed handler,
   so every thread that starts later, and every thread that never compiled, uses it. This is the
   only route that reaches other threads: ``V.set_choices_handler`` is per thread, and from torch
   2.12 Inductor config overrides (``config.inductor_choices_class`` included) are per thread too.
2. The installing thread's cached handler (``V.choices``), if it had one, is removed so that the
   factory serves it; it is restored on uninstall.
3. ``config.inductor_choices_class`` in the installing thread is set to a factory whose
   instances' ``uuid()`` changes with the model and options, so the FX graph cache never reuses a
   graph compiled with another model or without torch-diode (2.12+ asks the factory for
   ``uuid()``; 2.10/2.11 pickle it into the key).

Limits: a thread that cached a handler before the install (it compiled already) keeps its own
handler; and from 2.12 the FX-graph-cache key of compiles in threads other than the installing
one does not carry the uuid (their config is theirs). A handler replaced or uninstalled while a
thread still holds it turns itself into stock Inductor (it is deactivated).

torch 2.9 and older: one ``RuntimeWarning``, nothing installed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from torch_diode.config import config as diode_config
from torch_diode.inductor import compat

logger = logging.getLogger(__name__)

_lock = threading.RLock()
_UNSET = object()
_warned_unsupported = False


class DiodeChoicesFactory:
    """The zero-argument ``config.inductor_choices_class`` value: returns the installed handler.

    Pickles as its handler (whose pickled state carries its ``uuid()``), so torch 2.10/2.11's
    FX-cache key, which pickles this object, changes with the model and options too.
    """

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def __call__(self) -> Any:
        return self.handler

    def uuid(self) -> str:
        return str(self.handler.uuid())

    def __reduce__(self) -> tuple[Any, ...]:
        return (DiodeChoicesFactory, (self.handler,))

    def __deepcopy__(self, memo: dict[int, Any]) -> DiodeChoicesFactory:
        # torch.compile(mode=...) deep-copies Inductor's config: the copy serves the same handler.
        return self

    def __repr__(self) -> str:
        return f"DiodeChoicesFactory({self.handler.uuid()})"


@dataclass
class _Original:
    """What the first install replaced."""

    default_factory: Callable[[], Any]
    thread_ident: int
    thread_value: Any  # the installing thread's cached handler, or _UNSET
    choices_class: Any  # config.inductor_choices_class in the installing thread


_original: _Original | None = None
_stack: list[Any] = []  # installed handlers, the current one last
_changes = 0  # installs and removals so far (stock_inductor puts its handlers back only if none came meanwhile)
#: handlers installed by hand whose install a registration took over (:func:`take_over`) -> that registration,
#: so that the hand install's handle can say why its uninstall finds nothing to remove
_taken_over: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _serve_installed() -> Any:
    """The replacement of Inductor's default-handler factory (no per-thread caching: an
    uninstall or a newer install reaches every thread that did not set a handler itself)."""
    with _lock:
        if _stack:
            return _stack[-1]
        original = _original
    if original is not None:
        return original.default_factory()
    from torch._inductor.choices import InductorChoices

    return InductorChoices()


class DiodeHandle:
    """What :func:`install_diode_choices` returns: the handler, and a context manager that
    restores what was there before (as :meth:`uninstall` does)."""

    def __init__(self, handler: Any, *, installed: bool, owns: bool, reason: str = "", taker: bool = False) -> None:
        self.handler = handler
        self.installed = installed
        self.reason = reason
        self._owns = owns  # False for an idempotent re-install: leaving it uninstalls nothing
        self._taker = taker  # a registration's handle of a hand install it took over (take_over)

    def get_stats(self) -> dict[str, Any]:
        """The handler's :meth:`~DiodeInductorChoices.get_stats` ({} when nothing was installed)."""
        return self.handler.get_stats() if self.handler is not None else {}

    def uninstall(self) -> bool:
        """Remove this install (the handler installed before it, or stock Inductor, is back).

        Where ``register_model`` registered the same model and options while this install was in
        place, the registration took it over (:func:`take_over`): either one removes it. Once the
        other has (a later ``register_model``, ``unregister_model``, ``uninstall_diode_choices``),
        this removes nothing and warns (``RuntimeWarning``) rather than leave the caller believing
        it restored their state.

        Returns:
            True when something was removed.
        """
        return self._uninstall(stacklevel=3)

    def _uninstall(self, *, stacklevel: int) -> bool:
        if not self._owns or self.handler is None:
            return False
        self._owns = False
        if _remove(self.handler):
            return True
        taker = None if self._taker else _taken_over.get(self.handler)
        if taker is not None:
            warnings.warn(
                f"torch-diode: this handle's install of {self.handler!r} was taken over by {taker} (the same model "
                "and options) and is not installed now (a later register_model, unregister_model or "
                "uninstall_diode_choices removed it, or a stock Inductor measurement has it out); nothing was "
                "uninstalled now. unregister_model() removes whatever is registered",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
        return False

    def __enter__(self) -> DiodeHandle:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._uninstall(stacklevel=3)

    def __repr__(self) -> str:
        state = "installed" if self.installed else f"not installed ({self.reason})"
        return f"DiodeHandle({state}, handler={self.handler!r})"


def create_diode_choices(model: Any = None, **options: Any) -> Any:
    """A :class:`~torch_diode.inductor.choices.DiodeInductorChoices`, not installed.

    Use it with ``V.set_choices_handler(...)`` for one thread, or install it with
    :func:`install_diode_choices`. ``model`` is a file path, a registered model name, or a loaded
    ``DiodeModel``; ``options`` are :class:`~torch_diode.config.DiodeOptions` fields, defaulting
    to :data:`torch_diode.config.config`.

    The model and the lookup table are loaded and checked here (about 25 ms for a shipped model), so
    a missing, unknown or corrupt one is an error now rather than a stock fallback at the first GEMM.

    Raises:
        TypeError / ValueError: an unknown or invalid option, or no model and no lookup table.
        RuntimeError: torch is older than 2.10.
        DiodeError: the model or table cannot be used (:meth:`DiodeInductorChoices.preload` lists
            which: ``ModelNotFoundError``, ``ModelFormatError``, a registered model not downloaded, ...).
    """
    reason = compat.unsupported_reason()
    if reason is not None:
        raise RuntimeError(reason)
    handler = _new_handler(model, options)
    handler.preload()
    return handler


def _new_handler(model: Any, options: dict[str, Any]) -> Any:
    """A handler of ``model`` and ``options`` (a path made absolute), its model not loaded yet."""
    from torch_diode.inductor.choices import DiodeInductorChoices

    model_obj = None
    if model is not None and not isinstance(model, str) and callable(getattr(model, "predict", None)):
        model_obj, model = model, None
    opts = diode_config.options(model=model, **options)
    if opts.model is not None:
        from torch_diode.registry import looks_like_path

        if looks_like_path(opts.model):  # a compile subprocess loads it again: a chdir meanwhile must not lose it
            opts = opts.replace(model=os.path.abspath(os.path.expanduser(opts.model)))
    return DiodeInductorChoices(opts, model=model_obj)


def install_diode_choices(model: Any = None, **options: Any) -> DiodeHandle:
    """Use torch-diode's choices handler for every GEMM Inductor lowers, in every thread.

    Args:
        model: model file path, registered model name or loaded ``DiodeModel``; default
            ``torch_diode.config.model`` (``TORCH_DIODE_MODEL``).
        **options: :class:`~torch_diode.config.DiodeOptions` fields (``top_k_configs``,
            ``performance_threshold``, ``enable_fallback``, ``confidence_threshold``,
            ``cache_predictions``, ``lut``, ``search_space``, ``device_types``).

    Returns:
        A :class:`DiodeHandle`; ``with install_diode_choices(...):`` restores the previous state
        on exit. Installing a handler equal to the current one changes nothing (the handle's exit
        then uninstalls nothing). ``register_model`` of the same model and options, while this is
        the current install, takes it over (:func:`take_over`): once the registry has removed it, the handle's exit
        removes nothing and warns. On torch < 2.10, or with ``TORCH_DIODE_DISABLE=1``, nothing is
        installed and ``handle.installed`` is False (torch < 2.10 warns once).

    Raises:
        TypeError / ValueError: an unknown or invalid option, or neither a model nor a table.
        DiodeError: the model or the lookup table cannot be used (missing, unknown, corrupt, or a
            registered model not downloaded); nothing is installed then.
    """
    global _warned_unsupported
    reason = compat.unsupported_reason()
    if reason is not None:
        if not _warned_unsupported:
            _warned_unsupported = True
            warnings.warn(f"torch-diode is not installed: {reason}", RuntimeWarning, stacklevel=2)
            logger.warning("torch-diode is not installed: %s", reason)
        return DiodeHandle(None, installed=False, owns=False, reason=reason)
    if diode_config.disable:
        logger.info("torch-diode is not installed: TORCH_DIODE_DISABLE is set")
        return DiodeHandle(None, installed=False, owns=False, reason="TORCH_DIODE_DISABLE is set")
    handler = _new_handler(model, options)
    same = _installed_equal(handler)
    if same is not None:
        return same
    # Loaded outside the lock: compiling threads take it for their handler (_serve_installed), and
    # resolving a registered name takes the registry's lock, which register_model holds while it
    # installs (loading under this lock deadlocked the two). A model that cannot be used raises here.
    handler.preload()
    with _lock:
        same = _installed_equal(handler)  # installed by another thread meanwhile
        if same is not None:
            return same
        _push(handler)
    return DiodeHandle(handler, installed=True, owns=True)


def _installed_equal(handler: Any) -> DiodeHandle | None:
    """A handle of the installed handler when it equals ``handler`` (same options and model object)."""
    with _lock:
        current = _stack[-1] if _stack else None
        if current is not None and current.options == handler.options and current._given_model is handler._given_model:
            logger.debug("torch-diode: handler already installed with the same model and options")
            return DiodeHandle(current, installed=True, owns=False)
    return None


def take_over(handle: DiodeHandle, *, by: str) -> DiodeHandle:
    """A handle that owns ``handle``'s install, for ``by`` (``register_model``, which must be able
    to remove what it registered).

    ``handle`` itself when it owns its install. Where it owns nothing (it found an equal handler
    already installed, by hand with :func:`install_diode_choices`), a second owner of that
    install: either handle's ``uninstall()`` removes it; where the returned one's (or an
    :func:`uninstall_diode_choices`) does first, the hand install's handle removes nothing and
    warns, naming ``by``.

    Raises:
        TypeError: ``handle`` is not a :class:`DiodeHandle`.
    """
    if not isinstance(handle, DiodeHandle):
        raise TypeError(f"expected the DiodeHandle install_diode_choices returned, got {type(handle).__name__}")
    if handle._owns or handle.handler is None:
        return handle
    with _lock:
        _taken_over[handle.handler] = by
    logger.info("torch-diode: %s takes over the install of %r, made by hand", by, handle.handler)
    return DiodeHandle(handle.handler, installed=handle.installed, owns=True, taker=True)


def uninstall_diode_choices() -> bool:
    """Remove every torch-diode install and restore Inductor's state from before the first one.

    Returns:
        True when something was installed.
    """
    global _changes
    with _lock:
        if not _stack:
            return False
        _changes += 1
        _take_all_out()
    return True


def installed_handler() -> Any:
    """The handler installed now, or None."""
    with _lock:
        return _stack[-1] if _stack else None


def is_installed(handler: Any) -> bool:
    """Whether ``handler`` is installed (current, or under a later install that will give way to it)."""
    with _lock:
        return any(h is handler for h in _stack)


@contextlib.contextmanager
def stock_inductor() -> Iterator[None]:
    """Stock Inductor for the block, whatever torch-diode installed.

    Every installed handler is taken out, as :func:`uninstall_diode_choices` does (a thread that
    still holds one gets stock behaviour from it), and put back at the end, in the same order.
    The collectors and the benchmarks' stock modes measure through this, so that a model
    registered in the process, by ``register_model`` or by the torch-diode meta-wheel's
    auto-registration at import, never changes what they record as stock Inductor's. Where
    something was installed or removed during the block, what is installed then is left as it is.
    """
    with _lock:
        saved = _take_all_out(quiet=True)
        if saved:
            logger.info("torch-diode: %r taken out while stock Inductor is measured", saved[-1])
        changes = _changes
    try:
        yield
    finally:
        if saved:
            with _lock:
                if _changes == changes:
                    for handler in saved:
                        _push(handler, quiet=True)
                    saved[-1]._active = True
                    logger.info("torch-diode: %r installed again", saved[-1])
                else:
                    logger.warning(
                        "torch-diode: handler %r was not installed again after a stock Inductor measurement: "
                        "another install or uninstall happened meanwhile",
                        saved[-1],
                    )


# -- internals ----------------------------------------------------------------------------------


def _take_all_out(*, quiet: bool = False) -> list[Any]:
    """Deactivate and remove every installed handler and restore Inductor's state from before the
    first install (under ``_lock``); the handlers that were installed, the current one last."""
    saved = list(_stack)
    if saved:
        for handler in saved:
            handler._active = False
        _stack.clear()
        _restore_original(quiet=quiet)
    return saved


def _push(handler: Any, *, quiet: bool = False) -> None:
    """Install ``handler`` on top (``quiet``: its steps logged at DEBUG, not INFO)."""
    global _original, _changes
    say = logger.debug if quiet else logger.info
    from torch._inductor import config as inductor_config

    _changes += 1
    holder: Any = compat.choices_virtual()
    local = compat.thread_local_store()
    if _original is None:
        value = getattr(local, holder._key, _UNSET)
        _original = _Original(
            default_factory=holder._default,
            thread_ident=threading.get_ident(),
            thread_value=value,
            choices_class=inductor_config.inductor_choices_class,
        )
        holder._default = _serve_installed
        say("torch-diode: Inductor's default choices handler (all threads) is now %r", handler)
        if value is not _UNSET:
            delattr(local, holder._key)
            say("torch-diode: replaced this thread's choices handler %r", value)
        if _original.choices_class is not None:
            logger.warning(
                "torch-diode: config.inductor_choices_class=%r is superseded while torch-diode is installed",
                _original.choices_class,
            )
    else:
        previous = _stack[-1] if _stack else None
        if previous is not None:
            previous._active = False
        say("torch-diode: replaced the installed handler %r with %r", previous, handler)
    _stack.append(handler)
    inductor_config.inductor_choices_class = DiodeChoicesFactory(handler)
    say("torch-diode: config.inductor_choices_class (this thread) is now the torch-diode factory")


def _remove(handler: Any) -> bool:
    global _changes
    from torch._inductor import config as inductor_config

    with _lock:
        if handler not in _stack:
            return False
        _changes += 1
        was_current = _stack[-1] is handler
        _stack.remove(handler)
        handler._active = False
        if not _stack:
            _restore_original()
        elif was_current:
            _stack[-1]._active = True
            inductor_config.inductor_choices_class = DiodeChoicesFactory(_stack[-1])
            logger.info("torch-diode: handler %r removed; %r is installed again", handler, _stack[-1])
    return True


def _restore_original(*, quiet: bool = False) -> None:
    global _original
    say = logger.debug if quiet else logger.info
    from torch._inductor import config as inductor_config

    original = _original
    if original is None:
        return
    from torch_diode.inductor.choices import DiodeInductorChoices

    holder: Any = compat.choices_virtual()
    holder._default = original.default_factory
    if threading.get_ident() == original.thread_ident:
        local = compat.thread_local_store()
        current = getattr(local, holder._key, _UNSET)
        # Only what torch-diode replaced is put back: a handler the user set in this thread after
        # the install (V.set_choices_handler) stays, and so does their config.inductor_choices_class.
        if current is _UNSET or isinstance(current, DiodeInductorChoices):
            if original.thread_value is not _UNSET:
                setattr(local, holder._key, original.thread_value)
            elif current is not _UNSET:
                delattr(local, holder._key)
        else:
            say("torch-diode: this thread's choices handler %r was set after the install; left in place", current)
        if isinstance(inductor_config.inductor_choices_class, DiodeChoicesFactory):
            inductor_config.inductor_choices_class = original.choices_class
    else:
        say(
            "torch-diode: uninstalled from another thread than the installing one; that thread's "
            "config.inductor_choices_class is left to its own (per-thread) config on torch >= 2.12"
        )
        if not compat.config_is_thread_local():
            inductor_config.inductor_choices_class = original.choices_class
    _original = None
    say("torch-diode: uninstalled; Inductor's stock choices handler is back")
