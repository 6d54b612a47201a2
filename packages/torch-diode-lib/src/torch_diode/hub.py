"""Fetch a model file from the Hugging Face Hub at its manifest's pinned revision, within a deadline.

:func:`fetch_model_file` is a thin, bounded wrapper over ``huggingface_hub.hf_hub_download``:

* the file is looked up in the Hugging Face cache first, without touching the network; only
  when it is not there is it downloaded, at the manifest's pinned commit;
* the cache is the Hub's own layout (``<cache>/models--owner--name/{blobs,refs,snapshots}``),
  at ``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``, read when the
  function is called (not when huggingface_hub was imported); ``HF_ENDPOINT`` likewise;
* ``HF_HUB_OFFLINE=1`` (or ``local_files_only=True``) uses the cache only;
* the download runs in a daemon worker thread and the caller waits at most ``timeout_s``
  (``TORCH_DIODE_HUB_TIMEOUT_S``, default 20 s): huggingface_hub retries a silent server with
  back-off for minutes, and registration must never hang a user's program. A download still
  running after the deadline finishes (or fails) in the background into the same cache;
* every file is verified against the manifest's size and sha256 before it is returned; a
  mismatch is refused and the file is not used.

Failures are kept apart, each with what to do next: :class:`HubOfflineError` (offline and not
cached), :class:`HubFileNotFoundError` (the Hub has no such repository, revision or file),
:class:`HubUnavailableError` (network down, a host that does not resolve, server error) and its subclass
:class:`HubTimeoutError` (no answer within the deadline), and
:class:`torch_diode.weights.ChecksumMismatchError`. All but the last derive from :class:`HubError`.

``huggingface_hub`` is imported inside the function: importing torch-diode never loads it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from torch_diode.errors import DiodeError
from torch_diode.weights import ChecksumMismatchError, ModelEntry, verify_file

logger = logging.getLogger(__name__)

TIMEOUT_ENV_VAR = "TORCH_DIODE_HUB_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 20.0
_TRUE = ("1", "on", "yes", "true")


class HubError(DiodeError):
    """A model file could not be obtained from the Hugging Face Hub or its cache."""


class HubOfflineError(HubError):
    """Offline mode (``HF_HUB_OFFLINE=1`` or ``local_files_only``) and the file is not in the cache."""


class HubFileNotFoundError(HubError):
    """The Hub answered that the repository, the pinned revision or the file does not exist."""


class HubUnavailableError(HubError):
    """The Hub could not be reached (network down, DNS, proxy, server error)."""


class HubTimeoutError(HubUnavailableError):
    """The Hub did not deliver the file within the deadline."""


def hub_cache_dir() -> Path:
    """The Hugging Face cache directory, from the environment as it is now (the Hub's own rule:
    ``HF_HUB_CACHE``, the older ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME``/hub, ``XDG_CACHE_HOME``)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expandvars(os.environ[var])).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.path.expandvars(os.environ["HF_HOME"])).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def offline_mode() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or the older ``TRANSFORMERS_OFFLINE``) is set to a true value."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


def default_timeout_s() -> float:
    """``TORCH_DIODE_HUB_TIMEOUT_S`` when set to a positive number, else 20 s."""
    raw = os.environ.get(TIMEOUT_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{TIMEOUT_ENV_VAR}={raw!r} must be a positive number of seconds, e.g. {TIMEOUT_ENV_VAR}=20")
    return value


def cached_model_file(entry: ModelEntry) -> Path | None:
    """``entry``'s file in the Hugging Face cache at its pinned revision, or None (not cached, or no
    Hub repository in the manifest). Neither downloads nor verifies: :func:`fetch_model_file` does."""
    if entry.hub_repo is None or entry.hub_revision is None:
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        entry.hub_repo, entry.file, cache_dir=str(hub_cache_dir()), revision=entry.hub_revision
    )
    return Path(found) if isinstance(found, str) else None


def fetch_model_file(
    entry: ModelEntry, *, local_files_only: bool | None = None, timeout_s: float | None = None
) -> Path:
    """Return a verified local copy of ``entry``'s file from the Hugging Face cache or the Hub.

    Args:
        entry: a manifest entry with ``hub_repo`` and ``hub_revision`` (a commit hash).
        local_files_only: True: the cache only; False: download when missing; None (default):
            the cache only when ``HF_HUB_OFFLINE`` is set.
        timeout_s: the most seconds to wait for a download (default :func:`default_timeout_s`).

    Returns:
        The file's path in the cache (``.../snapshots/<commit>/<file>``).

    Raises:
        ValueError: the entry names no Hub repository, or ``timeout_s`` is not positive.
        HubOfflineError: offline and not cached.
        HubFileNotFoundError: the Hub has no such repository, revision or file.
        HubUnavailableError: the Hub could not be reached, or failed while sending.
        HubTimeoutError: no complete answer within ``timeout_s``.
        ChecksumMismatchError: the file's size or sha256 differs from the manifest (not used).
    """
    if entry.hub_repo is None or entry.hub_revision is None:
        raise ValueError(f"model {entry.name!r} has no Hub repository in its manifest ({entry.source or 'no source'})")
    timeout = default_timeout_s() if timeout_s is None else float(timeout_s)
    if not timeout > 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
    offline = offline_mode() if local_files_only is None else local_files_only
    cache_dir = hub_cache_dir()
    where = f"{entry.file} of {entry.hub_repo} at revision {entry.hub_revision}"
    hint = (
        f"The refused copy was removed from the Hugging Face cache ({cache_dir}), so the next attempt downloads "
        "it again; if this persists, the published file differs from the manifest: report it to the models "
        "package's maintainers."
    )

    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        cached = hf_hub_download(
            entry.hub_repo, entry.file, revision=entry.hub_revision, cache_dir=str(cache_dir), local_files_only=True
        )
    except LocalEntryNotFoundError:
        pass
    else:
        logger.debug("model %s found in the Hugging Face cache: %s", entry.name, cached)
        try:
            return _verified(Path(cached), entry, hint=hint)
        except ChecksumMismatchError as exc:
            if offline:
                raise
            logger.warning("%s; downloading it again", exc)

    if offline:
        fetch = f"`hf download {entry.hub_repo} {entry.file} --revision {entry.hub_revision}`"
        if local_files_only is None:
            raise HubOfflineError(
                f"model {entry.name!r} ({where}) is not in the Hugging Face cache {cache_dir}, and offline mode "
                f"(HF_HUB_OFFLINE=1) forbids downloading it. Unset HF_HUB_OFFLINE, or fetch it once while online "
                f"({fetch}), or install a models wheel that carries it."
            )
        also = " (with HF_HUB_OFFLINE unset: it is set here)" if offline_mode() else ""
        raise HubOfflineError(  # a caller that never downloads: the choices handler, --init-from
            f"model {entry.name!r} ({where}) is not downloaded yet (not in the Hugging Face cache {cache_dir}), and "
            f"this does not download (a compile never touches the network). Fetch it first{also}: "
            f"torch_diode_models.register_model({entry.name!r}) downloads and registers it, or {fetch}; or install "
            "a models wheel that carries it."
        )

    endpoint = os.environ.get("HF_ENDPOINT") or None
    logger.info(
        "downloading model %s (%s, %d bytes) from %s", entry.name, where, entry.size_bytes, endpoint or "the Hub"
    )
    start = time.monotonic()
    path = _download_with_deadline(entry, cache_dir=cache_dir, endpoint=endpoint, timeout_s=timeout, where=where)
    logger.info("downloaded model %s in %.1f s: %s", entry.name, time.monotonic() - start, path)
    return _verified(path, entry, hint=hint)


def _verified(path: Path, entry: ModelEntry, *, hint: str) -> Path:
    """``verify_file`` on a file of the Hugging Face cache; a file it refuses is removed from the
    cache (the snapshot's link and the blob it points to), so that it is not found again (a
    corrupted or truncated download would otherwise be refused forever, never fetched again)."""
    try:
        return verify_file(path, entry, hint=hint)
    except ChecksumMismatchError:
        blob = path.resolve()
        for p in (path, blob):
            with contextlib.suppress(OSError):
                p.unlink()
        raise


def _download_with_deadline(
    entry: ModelEntry, *, cache_dir: Path, endpoint: str | None, timeout_s: float, where: str
) -> Path:
    """Run ``hf_hub_download`` in a daemon thread and wait at most ``timeout_s`` for it."""
    from huggingface_hub import hf_hub_download

    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            # A host that does not resolve (no network, no DNS) fails here at once; huggingface_hub
            # would retry it with back-off until the deadline and report only a timeout. Through a
            # proxy the proxy resolves it, so then nothing is looked up here.
            url = urlsplit(endpoint or "https://huggingface.co")
            proxies = urllib.request.getproxies()
            proxied = bool(proxies.get(url.scheme) or proxies.get("all")) and not urllib.request.proxy_bypass(
                url.hostname or ""
            )
            if url.hostname and not proxied:
                socket.getaddrinfo(url.hostname, url.port or (443 if url.scheme == "https" else 80))
            outcome["path"] = hf_hub_download(
                entry.hub_repo,  # type: ignore[arg-type]
                entry.file,
                revision=entry.hub_revision,
                cache_dir=str(cache_dir),
                endpoint=endpoint,
                etag_timeout=min(timeout_s, 10.0),
            )
        # Every failure must reach the caller, who classifies it: the HTTP client's own exception
        # types differ between huggingface_hub versions (requests, httpx, httpx2), so there is no
        # narrower base class to name here.
        except BaseException as exc:
            outcome["error"] = exc

    # A daemon thread, not a ThreadPoolExecutor: executor threads are joined at interpreter exit,
    # which would make a user's program wait for a silent server after all.
    worker = threading.Thread(target=work, name=f"torch-diode-hub-{entry.name}", daemon=True)
    retries = _RetryLog(worker)
    hf_logger = logging.getLogger("huggingface_hub")
    hf_logger.addHandler(retries)
    try:
        worker.start()
        # huggingface_hub retries a refused connection with back-off too: nothing listens at that
        # address (a wrong HF_ENDPOINT, a proxy that is down), so say so at once, not at the deadline
        _join_unless_refused(worker, retries, timeout_s)
    finally:
        hf_logger.removeHandler(retries)
    host = endpoint or "huggingface.co"
    if worker.is_alive() and retries.refused.is_set():
        raise HubUnavailableError(
            f"model {entry.name!r}: the connection to {host} or its proxy was refused ({where}): nothing "
            "listens there. Check HF_ENDPOINT and the proxy (HTTPS_PROXY, HTTP_PROXY), or download it ahead "
            f"of time: `hf download {entry.hub_repo} {entry.file} --revision {entry.hub_revision}`."
        )
    if worker.is_alive():
        answered = retries.last is not None and "HTTP Error" in retries.last  # an error it retries (a 5xx)
        if answered:
            why = (
                f"huggingface_hub was still retrying after: {retries.last}. The server is failing or "
                "overloaded: try again later"
            )
        elif retries.last is not None:  # no answer: a connection or a read that failed
            why = f"huggingface_hub was still retrying after: {retries.last}. Check the network (HTTPS_PROXY, firewall)"
        else:
            why = "Check the network (HTTPS_PROXY, firewall)"
        raise HubTimeoutError(
            f"model {entry.name!r}: the Hub ({endpoint or 'huggingface.co'}) did not deliver {where} within "
            f"{timeout_s:g} s; {why}, raise {TIMEOUT_ENV_VAR}, or download it ahead of time: "
            f"`hf download {entry.hub_repo} {entry.file} --revision {entry.hub_revision}`."
        )
    if "error" in outcome:
        raise _classify(outcome["error"], entry, where=where, endpoint=endpoint)  # type: ignore[arg-type]
    return Path(outcome["path"])  # type: ignore[arg-type]


def _join_unless_refused(worker: threading.Thread, retries: _RetryLog, timeout_s: float) -> None:
    """Wait for ``worker`` up to ``timeout_s``, or until it retries a refused connection."""
    end = time.monotonic() + timeout_s
    while worker.is_alive() and not retries.refused.is_set() and (left := end - time.monotonic()) > 0:
        worker.join(min(left, 0.05))


class _RetryLog(logging.Handler):
    """The last error huggingface_hub logged, from one download thread, before retrying it, and
    whether it was a refused connection (``refused``)."""

    def __init__(self, worker: threading.Thread) -> None:
        super().__init__(logging.WARNING)
        self.worker = worker
        self.last: str | None = None
        self.refused = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.worker.ident and "thrown while requesting" in (message := record.getMessage()):
            self.last = message
            if "Connection refused" in message:
                self.refused.set()


def _classify(exc: BaseException, entry: ModelEntry, *, where: str, endpoint: str | None) -> BaseException:
    """Map a huggingface_hub failure to one of our errors (chained to the original)."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit in the worker
        return exc
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 8:
        chain.append(chain[-1].__cause__)  # type: ignore[arg-type]
    host = endpoint or "huggingface.co"
    error: HubError
    if isinstance(exc, socket.gaierror):
        error = HubUnavailableError(
            f"model {entry.name!r}: cannot resolve the host of {host} ({exc}): no network or no DNS. Connect, or "
            f"set HF_HUB_OFFLINE=1 to use the Hugging Face cache only, or download it ahead of time: "
            f"`hf download {entry.hub_repo} {entry.file} --revision {entry.hub_revision}`."
        )
    elif any(isinstance(e, OfflineModeIsEnabled) for e in chain):
        error = HubOfflineError(
            f"model {entry.name!r} ({where}) is not cached and huggingface_hub is in offline mode "
            "(HF_HUB_OFFLINE was set when it was imported); unset HF_HUB_OFFLINE and restart, or fetch the file "
            "while online"
        )
    elif isinstance(exc, (RepositoryNotFoundError, RevisionNotFoundError)) or (
        isinstance(exc, EntryNotFoundError) and not isinstance(exc, LocalEntryNotFoundError)
    ):
        kind = (
            "repository"
            if isinstance(exc, RepositoryNotFoundError)
            else "revision"
            if isinstance(exc, RevisionNotFoundError)
            else "file"
        )
        error = HubFileNotFoundError(
            f"model {entry.name!r}: {host} has no such {kind} ({where}); the manifest ({entry.source or 'unknown'}) "
            "points at something that was never published or was deleted: upgrade the models package, or install "
            "a wheel that carries the weights"
        )
    elif isinstance(exc, HfHubHTTPError) and getattr(getattr(exc, "response", None), "status_code", 0) in (401, 403):
        error = HubFileNotFoundError(
            f"model {entry.name!r}: {host} refused access to {where} (HTTP "
            f"{exc.response.status_code}); log in with `hf auth login` if the repository is private or gated"
        )
    else:
        # LocalEntryNotFoundError here means the HEAD call failed (connection refused, DNS, 5xx),
        # and anything else is a failure while the file was being sent.
        cause = chain[-1]
        error = HubUnavailableError(
            f"model {entry.name!r}: could not download {where} from {host} "
            f"({type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else 'no detail'}). Check the "
            f"network and HF_ENDPOINT, or download it ahead of time: `hf download {entry.hub_repo} {entry.file} "
            f"--revision {entry.hub_revision}`."
        )
    error.__cause__ = exc
    return error
