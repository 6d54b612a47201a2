"""Model files: exact round trips, deterministic bytes, and refusal of anything else."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from test_inductor_helpers import SHIPPED_H100, SHIPPED_H200

from torch_diode.errors import ModelFormatError
from torch_diode.features import FEATURE_SPEC, featurize, gpu_constants
from torch_diode.model import (
    _PLAIN_META,
    ARCH_PRESETS,
    PREDICT_THREADS_WAIT_S,
    Architecture,
    DiodeModel,
    Normalization,
    ScoringOptions,
    _encode_safetensors,
    build_model,
    init_network,
    load_model,
    save_model,
    torch_threads,
)
from torch_diode.records import Choice, Problem

H100 = "NVIDIA-H100"
PROBLEM = Problem(op="mm", m=1000, n=2048, k=512, dtype="bfloat16")
CHOICES = [
    Choice(template="triton::mm", block_m=bm, block_n=bn, block_k=bk, group_m=8, num_stages=s, num_warps=w, even_k=True)
    for bm in (32, 128)
    for bn in (64, 256)
    for bk in (32, 64)
    for s in (2, 4)
    for w in (4, 8)
] + [Choice.aten("mm")]


def make_model(model_type: str = "deep", members: int = 3, seed: int = 0) -> DiodeModel:
    x = featurize(PROBLEM, CHOICES, H100)
    y = np.linspace(1.0, 3.0, len(CHOICES)).astype(np.float32)
    arch = Architecture(model_type=model_type, input_dim=len(FEATURE_SPEC), members=members, **ARCH_PRESETS[model_type])
    m = build_model(arch, hardware=H100, gpu=gpu_constants(H100), normalization=Normalization.fit(x, y), seed=seed)
    m.update_metadata({"feature_spec": FEATURE_SPEC.to_dict(), "training_data_hash": "0" * 64, "held_out_metrics": {},
                       "torch_version": torch.__version__, "triton_version": "none"})  # fmt: skip
    return m


def make_screened(model_type: str = "deep", members: int = 3, screen_hidden: int = 8) -> DiodeModel:
    """:func:`make_model` with a one-member screening network of ``screen_hidden``."""
    m = make_model(model_type, members)
    m.screen = init_network(dataclasses.replace(m.arch, hidden=screen_hidden, members=1), seed=11)
    return m


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_model(make_model(), tmp_path_factory.mktemp("m") / "m.safetensors")


@pytest.mark.parametrize("model_type", ["base", "deep"])
def test_round_trip_reproduces_predictions_exactly(tmp_path: Path, model_type: str) -> None:
    m = make_model(model_type)
    before = m.predict(PROBLEM, CHOICES)
    path = save_model(m, tmp_path / "m.safetensors")
    loaded = load_model(path)
    after = loaded.predict(PROBLEM, CHOICES)
    assert np.array_equal(before.log_time_us, after.log_time_us)
    assert np.array_equal(before.std, after.std)
    assert loaded.model_hash == m.model_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert loaded.hardware == H100 and loaded.arch == m.arch
    assert loaded.metadata["feature_spec"] == FEATURE_SPEC.to_dict()
    assert loaded.metadata["format"] == "torch-diode-model"
    for key in (
        "normalization",
        "architecture",
        "training_data_hash",
        "torch_version",
        "triton_version",
        "held_out_metrics",
    ):
        assert key in loaded.metadata
    # the same model always serialises to the same bytes
    assert save_model(loaded, tmp_path / "again.safetensors").read_bytes() == path.read_bytes()


@pytest.mark.parametrize("screened", [False, True], ids=["first-member", "screen"])
@pytest.mark.parametrize("model_type", ["base", "deep"])
def test_network_cascade_scores_the_shortlist_with_every_member(
    tmp_path: Path, model_type: str, screened: bool
) -> None:
    """Past ``network_shortlist`` candidates, the first member's (or the screen's) best
    ``network_shortlist``, the ATen choice always among them, get the whole ensemble's mean and
    spread; the rest the first member's (the screen's) prediction shifted by the shortlist's mean
    difference, and the shortlist's mean spread."""
    m = make_screened(model_type) if screened else make_model(model_type, members=3)
    m.scoring = ScoringOptions(network_shortlist=0)
    full = m.predict(PROBLEM, CHOICES)
    if screened:  # without the cascade the screen plays no part
        plain = make_model(model_type, members=3)
        plain.scoring = m.scoring
        assert np.array_equal(full.log_time_us, plain.predict(PROBLEM, CHOICES).log_time_us)
    x = featurize(PROBLEM, CHOICES, H100)
    norm = m.normalization  # the first member (the screen) alone, on the training path:
    with torch.inference_mode():
        member0 = (m.screen or m.net)(torch.from_numpy((x - norm.x_mean) * (1.0 / norm.x_std)))[0].numpy()
    first = member0 * norm.y_std + norm.y_mean
    k = 6
    m.scoring = ScoringOptions(network_shortlist=k)
    cas = m.predict(PROBLEM, CHOICES)
    aten = len(CHOICES) - 1
    short = {aten} | set(np.argsort(first[:aten], kind="stable")[: k - 1].tolist())
    rest = sorted(set(range(len(CHOICES))) - short)
    idx = sorted(short)
    np.testing.assert_allclose(cas.log_time_us[idx], full.log_time_us[idx], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cas.std[idx], full.std[idx], rtol=1e-4, atol=1e-5)
    shift = np.mean(full.log_time_us[idx] - first[idx])
    np.testing.assert_allclose(cas.log_time_us[rest], first[rest] + shift, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(cas.std[rest], np.mean(full.std[idx]), rtol=1e-4, atol=1e-5)
    assert cas.log_time_us.dtype == cas.std.dtype == np.float32
    # no more candidates than the shortlist: every member scores every candidate, as with 0
    m.scoring = ScoringOptions(network_shortlist=len(CHOICES))
    assert np.array_equal(m.predict(PROBLEM, CHOICES).log_time_us, full.log_time_us)
    # the options are part of the file: a round trip keeps them, and so the predictions
    m.scoring = ScoringOptions(network_shortlist=k)
    loaded = load_model(save_model(m, tmp_path / "m.safetensors"))
    assert loaded.scoring == ScoringOptions(network_shortlist=k) and loaded.metadata["scoring"] == {
        "network_shortlist": k
    }
    assert np.array_equal(loaded.predict(PROBLEM, CHOICES).log_time_us, cas.log_time_us)
    assert (loaded.screen is None) == (not screened)
    if screened:
        assert loaded.screen is not None and m.screen is not None and loaded.screen.arch == m.screen.arch
        assert loaded.metadata["screen"] == {"architecture": m.screen.arch.to_dict()}
        assert (
            save_model(loaded, tmp_path / "again.safetensors").read_bytes() == (tmp_path / "m.safetensors").read_bytes()
        )
        loaded.screen = None  # a part like the others: the file changes, the first member screens again
        assert (
            loaded.model_hash != m.model_hash
            and "screen" not in load_model(save_model(loaded, tmp_path / "plain.safetensors")).metadata
        )


def make_model_file(tmp_path: Path) -> Path:
    return save_model(make_model(), tmp_path / "plain.safetensors")


def test_a_screen_must_be_one_member_of_the_models_inputs_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    m = make_model()
    for arch, why in (
        (dataclasses.replace(m.arch, hidden=8, members=2), "2 members"),
        (dataclasses.replace(m.arch, hidden=8, members=1, input_dim=m.arch.input_dim - 1), "inputs"),
    ):
        with pytest.raises(ValueError, match=f"screen: must be a one-member network.*{why}"):
            m.screen = init_network(arch, seed=0)
    src = save_model(make_screened(), tmp_path / "s.safetensors")
    assert load_model(src).screen is not None
    two = dataclasses.replace(m.arch, hidden=8, members=2)
    bad = _rewrite(src, tmp_path / "fit.safetensors", meta={"screen": {"architecture": two.to_dict()}})
    with pytest.raises(ModelFormatError, match=r"screening network is malformed.*do not fit its architecture"):
        load_model(bad)
    weights = {f"screen.{k}": v.detach() for k, v in init_network(two, seed=0).state_dict().items()}
    bad = _rewrite(src, tmp_path / "two.safetensors", meta={"screen": {"architecture": two.to_dict()}}, tensors=weights)
    with pytest.raises(ModelFormatError, match="screening network has 2 members"):
        load_model(bad)
    bad = _rewrite(src, tmp_path / "meta.safetensors", drop=("screen",))
    with pytest.raises(ModelFormatError, match="screening network is malformed"):
        load_model(bad)
    bad = _rewrite(src, tmp_path / "w.safetensors", tensors={"screen.w_out": torch.zeros(1, 9, 1)})
    with pytest.raises(ModelFormatError, match=r"screening network is malformed.*w_out"):
        load_model(bad)
    v5 = _rewrite(make_model_file(tmp_path), tmp_path / "v5.safetensors", meta={"format_version": "5"})
    assert load_model(v5).screen is None  # files before session 54: no screen, the first member screens


def test_scoring_options_default_validation_and_refusal(model_file: Path, tmp_path: Path) -> None:
    """A new model has the default scoring options and its file stores them; a file without
    ``scoring`` metadata (before session 48) scores without the cascade, as it was validated; a
    malformed one is refused; bad options are refused with what is wrong."""
    assert load_model(model_file).metadata["scoring"] == {"network_shortlist": 128} == ScoringOptions().to_dict()
    old = load_model(_rewrite(model_file, tmp_path / "none.safetensors", drop=("scoring",)))
    assert "scoring" not in old.metadata and old.scoring == ScoringOptions(network_shortlist=0)
    for bad, why in (
        ({"network_shortlist": -1}, ">= 0"),
        ({"shortlist": 5}, "unknown scoring options"),
        ([3], "object"),
    ):
        f = _rewrite(model_file, tmp_path / "bad.safetensors", meta={"scoring": bad})
        with pytest.raises(ModelFormatError, match=f"scoring options are malformed.*{why}"):
            load_model(f)
    with pytest.raises(ValueError, match="network_shortlist: must be an integer >= 0"):
        ScoringOptions(network_shortlist=True)


@pytest.mark.parametrize("model_type", ["base", "deep"])
def test_prediction_shapes_uncertainty_and_batched_path(model_type: str) -> None:
    """``predict`` (the problem's columns once, members one at a time) equals the training
    forward on the full feature matrix (all members batched), plain and residual networks."""
    m = make_model(model_type, members=3)
    p = m.predict(PROBLEM, CHOICES)
    assert p.log_time_us.shape == p.std.shape == (len(CHOICES),)
    assert (p.std > 0).all()
    full = m.predict_features(featurize(PROBLEM, CHOICES, H100))
    np.testing.assert_allclose(full.log_time_us, p.log_time_us, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(full.std, p.std, rtol=1e-4, atol=1e-5)
    single = make_model(model_type, members=1).predict(PROBLEM, CHOICES)
    assert not single.std.any()
    empty = m.predict(PROBLEM, [])
    assert empty.log_time_us.shape == (0,)


def test_predict_runs_on_one_thread_and_restores_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring runs single-threaded (a compile's CPU is shared with Inductor's workers) and leaves
    the process's thread count as it found it, also when blocks nest or run in several threads."""
    m = make_model()
    seen: list[int] = []
    real = m.net.forward_shared

    def watched(*args: object) -> torch.Tensor:  # the real forward, noting the thread count it ran with
        seen.append(torch.get_num_threads())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(m.net, "forward_shared", watched)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with torch_threads(None):
            assert torch.get_num_threads() == 2
        m.predict(PROBLEM, CHOICES)
        assert seen == [1] and torch.get_num_threads() == 2
        with torch_threads(3):
            assert torch.get_num_threads() == 3
            with torch_threads(1):
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 3
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError, match="boom"), torch_threads(1):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 2
        workers = [threading.Thread(target=lambda: [m.predict(PROBLEM, CHOICES) for _ in range(20)]) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert torch.get_num_threads() == 2 and seen == [1] * 81
        # a long block in another thread (a training run) holds the lock: scoring waits at most
        # PREDICT_THREADS_WAIT_S for it, then runs with the caller's count, unchanged
        held, release = threading.Event(), threading.Event()

        def trainer() -> None:
            with torch_threads(3):
                held.set()
                release.wait(timeout=60)

        t = threading.Thread(target=trainer)
        t.start()
        held.wait(timeout=60)
        try:
            count = torch.get_num_threads()  # 2 with OpenMP (per thread), 3 with the native backend
            t0 = time.perf_counter()
            m.predict(PROBLEM, CHOICES)
            waited = time.perf_counter() - t0
            assert seen[-1] == count and torch.get_num_threads() == count
            assert PREDICT_THREADS_WAIT_S <= waited < PREDICT_THREADS_WAIT_S + 10
        finally:
            release.set()
            t.join()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def _rewrite(
    src: Path, dst: Path, *, meta: dict | None = None, tensors: dict | None = None, drop: tuple[str, ...] = ()
) -> Path:
    """Re-encode a model file with changed metadata or tensors (valid checksums); a tensor given as
    None is left out, and so are the metadata keys in ``drop``. The file's neighbour memory, ATen
    head and forest tensors are kept."""
    data = src.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    md = {k: (v if k in _PLAIN_META else json.loads(v)) for k, v in header["__metadata__"].items()}
    md.pop("tensors_sha256")
    md.pop("metadata_sha256", None)
    md.update(meta or {})
    for k in drop:
        md.pop(k)
    loaded = load_model(src)
    ts = {k: v.detach().contiguous() for k, v in loaded.net.state_dict().items()}
    for part in (loaded.memory, loaded.aten_head, loaded.forest):
        if part is not None:
            ts.update({k: torch.from_numpy(v.copy()) for k, v in part.to_tensors().items()})
    if loaded.screen is not None:
        ts.update({f"screen.{k}": v.detach().contiguous() for k, v in loaded.screen.state_dict().items()})
    for k, v in (tensors or {}).items():
        if v is None:
            ts.pop(k)
        else:
            ts[k] = v
    dst.write_bytes(_encode_safetensors(ts, md))
    return dst


def test_refuses_other_format_version(model_file: Path, tmp_path: Path) -> None:
    bad = _rewrite(model_file, tmp_path / "v.safetensors", meta={"format_version": "99"})
    with pytest.raises(ModelFormatError, match="format version '99' is not supported"):
        load_model(bad)


def test_refuses_other_feature_version(model_file: Path, tmp_path: Path) -> None:
    spec = FEATURE_SPEC.to_dict() | {"version": FEATURE_SPEC.version + 1}
    bad = _rewrite(model_file, tmp_path / "f.safetensors", meta={"feature_spec": spec})
    with pytest.raises(ModelFormatError, match=f"feature spec version {FEATURE_SPEC.version + 1}"):
        load_model(bad)


def test_refuses_other_feature_names(model_file: Path, tmp_path: Path) -> None:
    names = list(FEATURE_SPEC.names)
    names[0], names[1] = names[1], names[0]
    bad = _rewrite(
        model_file, tmp_path / "n.safetensors", meta={"feature_spec": FEATURE_SPEC.to_dict() | {"names": names}}
    )
    with pytest.raises(ModelFormatError, match="differs from this torch-diode"):
        load_model(bad)
    transforms = list(FEATURE_SPEC.transforms)
    transforms[2] = "log2(K + 1)"
    bad = _rewrite(
        model_file,
        tmp_path / "t.safetensors",
        meta={"feature_spec": FEATURE_SPEC.to_dict() | {"transforms": transforms}},
    )
    with pytest.raises(
        ModelFormatError,
        match=re.escape(
            f"first differences: {FEATURE_SPEC.names[2]!r} computed as 'log2(K + 1)' vs {FEATURE_SPEC.transforms[2]!r}"
        ),
    ):
        load_model(bad)
    norm = load_model(model_file).normalization.to_dict()
    bad = _rewrite(
        model_file, tmp_path / "x.safetensors", meta={"normalization": norm | {"x_mean": norm["x_mean"][:-1]}}
    )
    with pytest.raises(ModelFormatError, match=f"x_mean {len(FEATURE_SPEC) - 1} and x_std {len(FEATURE_SPEC)} values"):
        load_model(bad)


def test_refuses_weights_that_do_not_fit_the_architecture(model_file: Path, tmp_path: Path) -> None:
    bad = _rewrite(model_file, tmp_path / "s.safetensors", tensors={"w_out": torch.zeros(2, 2, 1)})
    with pytest.raises(ModelFormatError, match="do not fit the recorded architecture"):
        load_model(bad)


def test_refuses_corrupt_tensor_bytes(model_file: Path, tmp_path: Path) -> None:
    data = bytearray(model_file.read_bytes())
    data[-10] ^= 0xFF
    bad = tmp_path / "c.safetensors"
    bad.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="sha256; the file is corrupt"):
        load_model(bad)


def _edit_header(src: Path, dst: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """``src`` with ``edit`` applied to its parsed header, the tensor bytes unchanged and no
    checksum recomputed: what a corruption or a hand edit of the header does."""
    data = src.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    edit(header)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    dst.write_bytes(struct.pack("<Q", len(h)) + h + data[8 + n :])
    return dst


def test_a_changed_metadata_byte_is_refused_and_a_file_without_its_checksum_loads(
    model_file: Path, tmp_path: Path
) -> None:
    """The metadata's own sha256 catches what the tensor checksum cannot: a digit of the
    normalisation or the hardware figures changed loads with different predictions otherwise."""

    def sm_count(h: dict[str, Any]) -> None:
        gpu = h["__metadata__"]["gpu_constants"]
        assert '"sm_count": 132' in gpu
        h["__metadata__"]["gpu_constants"] = gpu.replace('"sm_count": 132', '"sm_count": 932')

    bad = _edit_header(model_file, tmp_path / "sm.safetensors", sm_count)
    with pytest.raises(ModelFormatError, match=r"metadata does not match its recorded sha256 .*re-download it"):
        load_model(bad)

    def drop(h: dict[str, Any]) -> None:
        del h["__metadata__"]["metadata_sha256"]

    old = load_model(_edit_header(model_file, tmp_path / "old.safetensors", drop))  # before session 65
    np.testing.assert_array_equal(
        old.predict(PROBLEM, CHOICES).log_time_us, load_model(model_file).predict(PROBLEM, CHOICES).log_time_us
    )


@pytest.mark.parametrize("shipped", [SHIPPED_H100, SHIPPED_H200], ids=["H100", "H200"])
def test_a_shipped_file_with_a_changed_metadata_digit_is_refused_by_path(shipped: Path, tmp_path: Path) -> None:
    """The shipped files carry ``metadata_sha256`` (since session 70): loaded by path, with no
    manifest to compare against, a changed digit of the hardware figures is refused, not loaded
    with other predictions."""

    def sm_count(h: dict[str, Any]) -> None:
        gpu = h["__metadata__"]["gpu_constants"]
        assert '"sm_count": 132' in gpu
        h["__metadata__"]["gpu_constants"] = gpu.replace('"sm_count": 132', '"sm_count": 133')

    bad = _edit_header(shipped, tmp_path / shipped.name, sm_count)
    with pytest.raises(ModelFormatError, match=r"metadata does not match its recorded sha256"):
        load_model(bad)


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        ({"y_std": 0.0}, "y_std 0.0 is not finite with y_std > 0"),
        ({"y_std": -1.0}, "y_std -1.0"),
        ({"y_std": 1e39}, "y_std inf"),
        ({"y_mean": 1e39}, "y_mean inf"),
        ({"y_std": None}, "y_std nan"),
    ],
    ids=["y_std-0", "y_std-negative", "y_std-inf", "y_mean-inf", "y_std-null"],
)
def test_refuses_a_target_normalisation_that_is_not_finite_and_positive(
    model_file: Path, tmp_path: Path, meta: dict[str, Any], why: str
) -> None:
    norm = load_model(model_file).normalization.to_dict() | meta
    bad = _rewrite(model_file, tmp_path / "n.safetensors", meta={"normalization": norm})
    with pytest.raises(ModelFormatError, match=re.escape(why)):
        load_model(bad)


@pytest.mark.parametrize(
    ("meta", "why"),
    [
        ({"gpu_constants": {"sm_count": 0}}, "sm_count: must be finite and positive, got 0"),
        ({"gpu_constants": {"sm_count": "132"}}, "sm_count: must be an integer, got '132'"),
        ({"gpu_constants": {"mem_bandwidth_gbs": -4800.0}}, "mem_bandwidth_gbs: must be finite and positive"),
        ({"gpu_constants": {"key": "NVIDIA-A100"}}, "hardware 'NVIDIA-H100' is not a hardware key, or not the key of its gpu_constants ('NVIDIA-A100')"),
        ({"hardware": "../../etc/passwd"}, "hardware '../../etc/passwd' is not a hardware key"),
        ({"hardware": ""}, "hardware '' is not a hardware key"),
        ({"architecture": {"activation": "gelu"}}, "activation 'gelu' is not what a 'deep' network has ('relu')"),
        ({"architecture": {"residual": False}}, "residual False is not what a 'deep' network has (True)"),
        ({"training_data_hash": 123, "held_out_metrics": []}, "metadata training_data_hash (int), held_out_metrics (list) is not"),
        ({"torch_version": None}, "metadata torch_version (NoneType) is not"),
    ],
    ids=["sm_count-0", "sm_count-str", "bandwidth-negative", "key-mismatch", "hardware-path", "hardware-empty", "activation", "residual", "hash-and-metrics", "torch-version"],
)  # fmt: skip
def test_refuses_hardware_figures_and_architecture_that_do_not_hold(
    model_file: Path, tmp_path: Path, meta: dict[str, Any], why: str
) -> None:
    m = load_model(model_file)
    current = {"gpu_constants": m.gpu.to_dict(), "architecture": m.arch.to_dict(), "hardware": m.hardware}
    change = {k: (current[k] | v if isinstance(v, dict) else v) for k, v in meta.items()}
    with pytest.raises(ModelFormatError, match=re.escape(why)):
        load_model(_rewrite(model_file, tmp_path / "g.safetensors", meta=change))


def test_refuses_a_header_over_the_cap_as_such(tmp_path: Path) -> None:
    huge = tmp_path / "h.safetensors"
    huge.write_bytes(struct.pack("<Q", 200_000_000) + b"{}" + b" " * 100)
    with pytest.raises(ModelFormatError, match="header claims 200,000,000 bytes, over the 100 MB"):
        load_model(huge)


@pytest.mark.parametrize(
    ("keep", "why"),
    [
        (0, "file is 0 bytes, too short"),
        (5, "file is 5 bytes, too short"),
        (8, "file is truncated inside its header (or the header's length is damaged): 8 bytes where the header alone takes"),
        (100, "file is truncated inside its header (or the header's length is damaged): 100 bytes where the header alone takes"),
        (-100, "file is truncated: {cut:,} bytes where its header describes {size:,}; re-download"),
    ],
    ids=["empty", "5-bytes", "length-only", "inside-header", "inside-data"],
)  # fmt: skip
def test_refuses_truncated_files(model_file: Path, tmp_path: Path, keep: int, why: str) -> None:
    """A cut file is called truncated, with its size and the size its header describes (not a
    checksum mismatch, which the tensor data's sha256 would also be); it is never loaded."""
    data = model_file.read_bytes()
    bad = tmp_path / "t.safetensors"
    bad.write_bytes(data[:keep])
    with pytest.raises(ModelFormatError, match=re.escape(why.format(cut=len(data[:keep]), size=len(data)))):
        load_model(bad)


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (
            b'{"format": "torch-diode-dataset", "schema_version": 1}\n',
            ": it is a torch-diode dataset file (timings), not a model",
        ),
        (
            b"\x83\xa6format\xb3torch-diode-dataset\xaeschema_version\x02",
            ": it is a torch-diode dataset file (timings), not a model",
        ),
        (b'{"some": "json", "that is": "long enough"}', ": it is JSON text"),
        (b"PK\x03\x04" + b"\x00" * 60, ": it is a zip archive (a torch.save checkpoint?)"),
        (b"hello, world: some text that is no model\n", ""),
    ],
    ids=["json-dataset", "msgpack-dataset", "json", "zip", "text"],
)
def test_a_file_that_is_no_safetensors_file_is_called_so(tmp_path: Path, content: bytes, what: str) -> None:
    """Its first 8 bytes, read as a header length, are absurd (past the file's end or the 100 MB
    cap) and the next byte opens no JSON object: "not a .safetensors model file", and what it
    looks like, not the header size those bytes would make."""
    path = tmp_path / "x.safetensors"
    path.write_bytes(content)
    with pytest.raises(ModelFormatError, match=re.escape(f"{path}: not a .safetensors model file{what}") + "$"):
        load_model(path)
    named = tmp_path / "x.msgpack"
    named.write_bytes(b"\x81\xa1a\x01" + b"\x00" * 20)  # some other msgpack file
    with pytest.raises(ModelFormatError, match=re.escape("not a .safetensors model file: by its name (.msgpack)")):
        load_model(named)


def test_refuses_foreign_safetensors_pickles_and_missing_files(tmp_path: Path) -> None:
    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, plain, metadata={"format": "pt"})
    with pytest.raises(ModelFormatError, match="not a torch-diode model"):
        load_model(plain)
    pickled = tmp_path / "pickled.safetensors"
    torch.save({"w": torch.zeros(2)}, pickled)  # a pickle: must never be unpickled
    with pytest.raises(ModelFormatError):
        load_model(pickled)
    with pytest.raises(ModelFormatError, match="no such model file"):
        load_model(tmp_path / "missing.safetensors")
    with pytest.raises(ModelFormatError, match="is a directory"):
        load_model(tmp_path)


def test_architecture_validation() -> None:
    with pytest.raises(ValueError, match="model_type"):
        Architecture(model_type="huge", input_dim=3, hidden=4, depth=1, members=1)
    with pytest.raises(ValueError, match="members"):
        Architecture(model_type="base", input_dim=3, hidden=4, depth=1, members=0)


def test_pickles_as_its_file_bytes() -> None:
    import pickle

    m = make_model()
    clone = pickle.loads(pickle.dumps(m))
    assert clone.model_hash == m.model_hash
    assert np.array_equal(clone.predict(PROBLEM, CHOICES).log_time_us, m.predict(PROBLEM, CHOICES).log_time_us)


def test_a_model_whose_hardware_and_figures_differ_is_not_built_or_saved(tmp_path: Path) -> None:
    m = make_model()
    with pytest.raises(ValueError, match="hardware 'NVIDIA-H200' and the hardware figures' key 'NVIDIA-H100' differ"):
        build_model(m.arch, hardware="NVIDIA-H200", gpu=m.gpu, normalization=m.normalization, seed=0)
    m.hardware = "NVIDIA-H200"
    with pytest.raises(ValueError, match=r"set \.gpu to gpu_constants\('NVIDIA-H200'\) too"):
        save_model(m, tmp_path / "m.safetensors")
    assert not (tmp_path / "m.safetensors").exists()
    m.gpu = gpu_constants("NVIDIA-H200")
    assert load_model(save_model(m, tmp_path / "m.safetensors")).hardware == "NVIDIA-H200"


def test_training_shapes_are_checked_at_load(model_file: Path, tmp_path: Path) -> None:
    """A file's list of training shapes (``training_shapes``, what ``--exclude-trained`` reads) is
    read as it is written, and a malformed one refuses the whole file."""
    from torch_diode.model import TrainedShapes
    from torch_diode.records import Problem

    assert load_model(model_file).trained_shapes is None  # a file that lists none
    # the digest is pinned: every file's list is of this string's sha256
    assert Problem(op="mm", m=64, n=128, k=256, dtype="bfloat16").shape_digest() == "aa5f35b78d91"
    p = Problem(op="mm", m=64, n=128, k=256, dtype="bfloat16", stride_a=(256, 1), stride_b=(128, 1))
    flipped = Problem(op="mm", m=64, n=128, k=256, dtype="bfloat16", stride_a=(256, 1), stride_b=(1, 256))
    other = Problem(op="mm", m=64, n=128, k=256, dtype="float16", stride_a=(256, 1), stride_b=(128, 1))
    good = TrainedShapes(frozenset({p.shape_digest()}), complete=False).to_dict()
    shapes = load_model(
        _rewrite(model_file, tmp_path / "ok.safetensors", meta={"training_shapes": good})
    ).trained_shapes
    assert shapes == TrainedShapes(frozenset({p.shape_digest()}), complete=False)
    assert p in shapes and flipped in shapes and other not in shapes and len(shapes) == 1
    bad_values = {
        "1 shape not 12 lowercase hex digits .e.g. 'zz0123456789'": good | {"shapes": ["zz0123456789"]},
        "1 shape not 12 lowercase hex digits .e.g. '0123'": good | {"shapes": ["0123"]},
        "2 shapes not 12 lowercase hex digits .e.g. '0123456789AB'": good | {"shapes": ["0123456789AB", 7]},
        "1 shape not 12 lowercase hex digits .e.g. '-0123456789a'": good | {"shapes": ["-0123456789a"]},
        "not sorted and distinct": good | {"shapes": [p.shape_digest()] * 2},
        "this torch-diode reads": good | {"digest": "md5"},
        "complete must be true or false": good | {"complete": "yes"},
        "not an object of digest, complete and shapes": {"shapes": []},
    }
    for i, (why, value) in enumerate(bad_values.items()):
        bad = _rewrite(model_file, tmp_path / f"bad{i}.safetensors", meta={"training_shapes": value})
        with pytest.raises(ModelFormatError, match=f"training_shapes metadata is malformed .*{why}"):
            load_model(bad)
