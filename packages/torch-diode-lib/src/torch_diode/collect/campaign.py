"""Data campaigns: the seeded problem lists of a GPU's training and validation sets, and their status.

A campaign is a directory ``data/<hardware key>/`` holding

* ``plan.json``: the plan (seeds, counts, sources) and the exact problem lists of both splits,
  regenerated bit for bit by :func:`plan_campaign` from the same arguments;
* ``train.msgpack``: the training set (ATen plus a seeded sample of the EXHAUSTIVE Triton space
  per problem), written by the sweep collector, resumable;
* ``val.msgpack``: the validation set (ATen plus the FULL EXHAUSTIVE Triton space and Inductor's
  DEFAULT candidates per problem), resumable.

Problems come from two sources, each split so that training and validation never share a shape:
the real-model shape set (``data/shapesets/real_models.json``, its own hash-based ``split``) and
the log-normal sampler (validation drawn with another seed and excluding every training shape).
Both lists are shuffled with the plan's seed, so a campaign stopped early still holds a
representative mix.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torch_diode._text import plural
from torch_diode.records import Problem

PLAN_FORMAT = "torch-diode-campaign-plan"
PLAN_VERSION = 1
#: :meth:`CampaignPlan.group`'s names.
PLAN_GROUPS = ("first", "one-misaligned", "output-misaligned")
DEFAULT_SHAPESET = Path("data/shapesets/real_models.json")


@dataclass(frozen=True, kw_only=True)
class CampaignOptions:
    """How many problems of each source go in each split, and the seeds.

    Attributes:
        train_lognormal, val_lognormal: problems drawn from the log-normal sampler.
        train_shapeset, val_shapeset: problems drawn (without replacement, seeded) from the shape
            set's ``train`` and ``val`` splits.
        ops, dtypes, layouts: what the sampler draws from.
        seed: the plan's seed; the validation sampler uses ``seed + 1``.
        lognormal_aligned_fraction: the log-normal problems' share of sizes rounded to multiples
            of 128 (the rest odd; see ``sample_problems``' ``aligned_fraction``): two
            divisibility classes, so the sweep compiles each config once per class instead of
            once per problem. None = sizes as drawn.
        train_max_configs: Triton configs sampled per training problem (None = the full space); 360
            leaves >= 300 timed where about a tenth do not fit in shared memory (330 left a median
            of 299; a campaign raised from 330 to 360 tops its problems up, `run --top-up`).
        train_sample: the sweep's ``sample`` mode for training (``"shared"``: problems share their
            sampled configs, so compiled kernels are reused across problems).
        train_max_compile_cost: the sweep's ``max_compile_cost`` for training: leaves out the fp32
            FMA tiles that take a minute or more each to compile (see ``SweepOptions``); the
            validation set always measures the full space.
        train_one_misaligned: training problems with exactly one operand whose rows are not
            16-byte aligned (``sample_problems``' ``one_misaligned``; log-normal, seed ``seed +
            2``, the plan's layouts that allow it), appended after the other training problems, so
            a plan grown by them keeps its lists and their order (a campaign collects them last).
            No shape (op, sizes, batch, dtype) of either split is drawn again.
        train_output_misaligned: training problems whose operands' rows are 16-byte aligned and
            whose output's are not (``sample_problems``' ``output_misaligned``; log-normal, seed
            ``seed + 3``, the plan's layouts that allow it: ``row/col``), appended after the
            ``train_one_misaligned`` ones, likewise keeping every earlier list and order. The
            other sources round N and K together, so they hardly hold this class (5 of the 1,158
            problems collected on the H100 before session 41), which real models have wherever a
            linear layer's output features are not a multiple of 8.
    """

    train_lognormal: int = 600
    train_shapeset: int = 500
    val_lognormal: int = 60
    val_shapeset: int = 120
    ops: tuple[str, ...] = ("mm", "addmm", "bmm", "baddbmm")
    dtypes: tuple[str, ...] = ("float16", "bfloat16", "float32")
    layouts: tuple[str, ...] = ("row/row", "row/col", "col/row")
    seed: int = 20261122
    lognormal_aligned_fraction: float | None = 0.7
    train_max_configs: int | None = 360
    train_sample: str = "shared"
    train_max_compile_cost: float | None = 131072.0
    train_one_misaligned: int = 0
    train_output_misaligned: int = 0

    def __post_init__(self) -> None:
        for name in (
            "train_lognormal",
            "train_shapeset",
            "val_lognormal",
            "val_shapeset",
            "train_one_misaligned",
            "train_output_misaligned",
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name}: must be a non-negative integer, got {v!r}")


@dataclass
class CampaignPlan:
    """The problem lists of one campaign (see the module docstring)."""

    options: CampaignOptions
    shapeset: str
    train: list[Problem] = field(default_factory=list)
    val: list[Problem] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        opts = asdict(self.options)
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "options": opts,
            "shapeset": self.shapeset,
            "train": [p.to_dict() for p in self.train],
            "val": [p.to_dict() for p in self.val],
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        from torch_diode._files import atomic_write

        # One problem per line: compact, and diffs of a re-planned campaign stay readable.
        d = self.to_dict()
        head = {k: v for k, v in d.items() if k not in ("train", "val")}
        parts = [json.dumps(head, indent=1)[:-2]]
        for split in ("train", "val"):
            rows = ",\n  ".join(json.dumps(p, separators=(",", ":")) for p in d[split])
            parts.append(f' "{split}": [\n  {rows}\n ]')
        text = ",\n".join(parts) + "\n}\n"
        json.loads(text)  # never write a plan we cannot read back
        return atomic_write(path, text)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CampaignPlan:
        p = Path(path)
        try:
            obj = json.loads(p.read_text())
        except FileNotFoundError:
            raise ValueError(f"{p}: no such file; write the plan first (scripts/campaign.py plan)") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: not valid JSON: {e}") from None
        if not isinstance(obj, dict) or obj.get("format") != PLAN_FORMAT:
            raise ValueError(f'{p}: not a campaign plan (no "format": "{PLAN_FORMAT}")')
        if obj.get("version") != PLAN_VERSION:
            raise ValueError(f"{p}: plan version {obj.get('version')!r}; this torch-diode reads {PLAN_VERSION}")
        o = dict(obj["options"])
        for k in ("ops", "dtypes", "layouts"):
            o[k] = tuple(o[k])
        return cls(
            options=CampaignOptions(**o),
            shapeset=obj["shapeset"],
            train=[Problem.from_dict(d) for d in obj["train"]],
            val=[Problem.from_dict(d) for d in obj["val"]],
        )

    @property
    def one_misaligned(self) -> list[Problem]:
        """The training problems the plan was grown by with one misaligned operand (``group``)."""
        return self.group("one-misaligned")

    @property
    def output_misaligned(self) -> list[Problem]:
        """The training problems the plan was grown by with aligned operands and a misaligned
        output (``group``)."""
        return self.group("output-misaligned")

    def group(self, name: str) -> list[Problem]:
        """A training group by name (:data:`PLAN_GROUPS`): ``train`` is ``first`` (the plan's
        first lists), then ``one-misaligned`` (``CampaignOptions.train_one_misaligned`` problems),
        then ``output-misaligned`` (``train_output_misaligned``)."""
        if name not in PLAN_GROUPS:
            raise ValueError(f"plan group {name!r}: known groups are {', '.join(PLAN_GROUPS)}")
        sizes = (self.options.train_one_misaligned, self.options.train_output_misaligned)
        ends = [len(self.train) - sum(sizes), len(self.train) - sizes[1], len(self.train)]
        k = PLAN_GROUPS.index(name)
        return self.train[ends[k - 1] if k else 0 : ends[k]]

    def mix(self, split: str) -> dict[str, dict[str, int]]:
        """Counts per op, dtype and size bucket of a split (for the data card)."""
        probs = self.train if split == "train" else self.val
        return problem_mix(probs)


def size_bucket(p: Problem) -> str:
    """A coarse size class: ``decode`` (M <= 64), ``tall-skinny``, ``large-K``, ``odd`` (a size not
    a multiple of 16), ``small``/``medium``/``large`` by FLOPs otherwise."""
    if p.m <= 64:
        return "decode (M<=64)"
    if max(p.m, p.n) >= 16 * min(p.m, p.n):
        return "tall-skinny"
    if p.k >= 4 * max(p.m, p.n) and p.k >= 4096:
        return "large-K"
    if any(x % 16 for x in (p.m, p.n, p.k)):
        return "odd (not multiple of 16)"
    flops = p.flops
    if flops < 2 * 512**3:
        return "small"
    if flops < 2 * 4096**3:
        return "medium"
    return "large"


def problem_mix(problems: Collection[Problem]) -> dict[str, dict[str, int]]:
    return {
        "op": dict(sorted(Counter(p.op for p in problems).items())),
        "dtype": dict(sorted(Counter(p.dtype for p in problems).items())),
        "size": dict(sorted(Counter(size_bucket(p) for p in problems).items())),
        "layout": dict(sorted(Counter(f"{p.layout_a}/{p.layout_b}" for p in problems).items())),
    }


def plan_campaign(options: CampaignOptions, shapeset: str | os.PathLike[str] = DEFAULT_SHAPESET) -> CampaignPlan:
    """Build the seeded problem lists of a campaign (the same arguments give the same plan)."""
    from torch_diode.shapes.sampling import sample_problems
    from torch_diode.shapes.shapeset import load_shapeset

    rng = random.Random(options.seed)
    ss = load_shapeset(shapeset)

    def from_set(split: str, n: int) -> list[Problem]:
        pool = ss.problems(split=split, ops=options.ops, dtypes=options.dtypes)
        return rng.sample(pool, min(n, len(pool)))

    train_set = from_set("train", options.train_shapeset)
    val_set = from_set("val", options.val_shapeset)
    common: dict[str, Any] = dict(
        ops=options.ops,
        dtypes=options.dtypes,
        layouts=options.layouts,
        aligned_fraction=options.lognormal_aligned_fraction,
    )
    train_ln = sample_problems(
        options.train_lognormal, seed=options.seed, sampler="log-normal", exclude=val_set, **common
    )
    train = list(dict.fromkeys(train_set + train_ln))
    train_shapes = {p.shape for p in train}
    # Validation never shares a shape (op, sizes, batch, dtype) with training, whatever the layout.
    val_pool = [p for p in val_set if p.shape not in train_shapes]
    val_ln: list[Problem] = []
    seed = options.seed + 1
    while len(val_ln) < options.val_lognormal:
        extra = sample_problems(
            options.val_lognormal, seed=seed, sampler="log-normal", exclude=train + val_pool + val_ln, **common
        )
        val_ln += [p for p in extra if p.shape not in train_shapes][: options.val_lognormal - len(val_ln)]
        seed += 1000
    val = list(dict.fromkeys(val_pool + val_ln))
    rng.shuffle(train)
    rng.shuffle(val)
    taken = {p.shape for p in train + val}
    train += _grown_problems(options, "one_misaligned", taken)
    train += _grown_problems(options, "output_misaligned", taken)
    return CampaignPlan(options=options, shapeset=str(shapeset), train=train, val=val)


def _grown_problems(options: CampaignOptions, kind: str, taken: set) -> list[Problem]:
    """The plan's ``train_<kind>`` problems (``CampaignOptions``; ``kind`` is ``one_misaligned``
    or ``output_misaligned``), none of whose shapes is in ``taken`` (which they join)."""
    from torch_diode.shapes import sampling

    n = getattr(options, f"train_{kind}")
    allowed = getattr(sampling, f"{kind}_layout")
    layouts = tuple(lay for lay in options.layouts if allowed(lay))
    if n and not layouts:
        need = "row/row, col/row or col/col" if kind == "one_misaligned" else "row/col or col/col"
        raise ValueError(
            f"train_{kind}: none of the plan's layouts ({', '.join(options.layouts)}) allows its class; add {need}"
        )
    out: list[Problem] = []
    seed = options.seed + (2 if kind == "one_misaligned" else 3)
    while len(out) < n:
        drawn = sampling.sample_problems(
            n,
            seed=seed,
            sampler="log-normal",
            ops=options.ops,
            dtypes=options.dtypes,
            layouts=layouts,
            one_misaligned=kind == "one_misaligned",
            output_misaligned=kind == "output_misaligned",
        )
        for p in drawn:
            if p.shape not in taken and len(out) < n:
                taken.add(p.shape)
                out.append(p)
        seed += 1000
    return out


def stock_picks_from_full_space(dataset: Any, search_space: str = "DEFAULT") -> tuple[dict[Problem, Any], list[str]]:
    """Stock max-autotune's pick per problem of a full-space dataset (the validation set), without
    a GPU: Inductor's own ``search_space`` candidates for the problem (enumerated here, as
    ``collect.sweep.inductor_choices`` does for the sweep) looked up in the measured times; the
    fastest is what max-autotune picks when it times its candidates the way the dataset did.
    Scored in the same timings, such a pick is low by selection (the fastest of ~20 noisy times),
    which favours stock against a model (:mod:`torch_diode.evaluate`); the ``val-stock`` split,
    stock's candidates timed in a run of their own, is not biased so.

    Returns:
        ``({problem: StockPick}, notes)``; ``notes`` names every problem left out (a DEFAULT
        candidate that is neither timed nor a recorded failure means the dataset does not hold
        the full space, so no pick is claimed for it).
    """
    from torch_diode.collect.sweep import inductor_choices
    from torch_diode.evaluate import StockPick

    failed: dict[Problem, set[Any]] = {}
    for f in dataset.failures:
        if f.choice is not None:
            failed.setdefault(f.problem, set()).add(f.choice)
    picks: dict[Problem, Any] = {}
    notes: list[str] = []
    for pt in dataset.by_problem():
        med = {dataset.choices[c]: t for c, t in pt.median_by_choice().items()}
        cands = {it.choice for it in inductor_choices(pt.problem, search_space)}
        missing = cands - set(med) - failed.get(pt.problem, set())
        if missing:
            notes.append(
                f"{pt.problem.key()}: {len(missing):,} of {plural(len(cands), f'{search_space} candidate')} not measured"
            )
            continue
        timed = [c for c in cands if c in med]
        if not timed:
            notes.append(f"{pt.problem.key()}: no {search_space} candidate ran")
            continue
        best = min(timed, key=lambda c: (med[c], c.key()))
        picks[pt.problem] = StockPick(best, float(med[best]))
    return picks, notes


def unpack_chunk(
    pack: str | os.PathLike[str], data_dir: str | os.PathLike[str], hardware: str
) -> tuple[list[Path], list[Path]]:
    """Copy one chunk's pack (``scripts/campaign_gpu.sh`` writes ``$OUT/<KEY>-data.tgz`` holding
    ``data/<KEY>/...``) into ``data_dir/<KEY>/``. Returns (files written, sidecars removed).

    All or nothing: every member must be a regular file or directory under ``data/<KEY>/``, and
    every dataset in it (``*.msgpack``, ``*.msgpack.partial``) must read strictly and hold only
    ``<KEY>``'s timings; otherwise ``ValueError`` says which and nothing is written. A ``<split>.msgpack.partial`` in the
    destination that the pack does not hold is removed: the chunk settled it (plain ``tar x``
    leaves it behind, and a stale sidecar duplicates parts the file already holds).
    """
    import lzma
    import shutil
    import tarfile
    import tempfile
    import zlib

    from torch_diode.dataset import read_dataset

    prefix = f"data/{hardware}"
    pack = Path(pack)
    dest = Path(data_dir) / hardware
    want = f"pass the chunk's pack, $OUT/{hardware}-data.tgz of scripts/campaign_gpu.sh"
    if not pack.is_file():
        raise ValueError(f"{pack}: {'a directory' if pack.is_dir() else 'no such file'}, not a campaign pack; {want}")
    damaged = (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError)  # a stream cut or garbled

    def _damaged(e: BaseException) -> ValueError:
        detail = " ".join(str(e).split()) or type(e).__name__
        return ValueError(
            f"{pack}: a truncated or damaged tar archive ({detail}); copy the chunk's pack again. Nothing was copied"
        )

    try:
        tar = tarfile.open(pack, "r:*")
    except tarfile.ReadError:  # its message lists every compression tried, one line each
        raise ValueError(f"{pack}: not a campaign pack: not a tar archive (plain, gzip, bzip2 or xz); {want}") from None
    except (EOFError, zlib.error, lzma.LZMAError) as e:  # a compressed stream cut inside its first tar header
        raise _damaged(e) from None
    except OSError as e:
        raise ValueError(f"{pack}: cannot be read ({e.strerror or e}); {want}") from None
    with tar:
        try:
            members = tar.getmembers()  # to the end of the archive: a truncated one fails here, before any copy
        except damaged as e:
            raise _damaged(e) from None
        for m in members:
            name = os.path.normpath(m.name)
            if not (name == prefix or name.startswith(prefix + "/")) or not (m.isfile() or m.isdir()):
                raise ValueError(
                    f"{pack}: member {m.name!r} is not a file or directory under {prefix}/; "
                    f"is this the pack of another GPU or not a campaign pack? Nothing was copied"
                )
        dest.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".unpack-{hardware}-") as tmp:
            tar.extractall(tmp, members=members, filter="data")
            root = Path(tmp) / prefix
            files = sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
            for f in files:
                if f.name.endswith((".msgpack", ".msgpack.partial")):
                    try:
                        keys = read_dataset(f).hardware_keys
                    except Exception as e:
                        raise ValueError(
                            f"{pack}: {f.relative_to(tmp)} is not a complete dataset ({e}); nothing was copied: "
                            "take the pack from the chunk again or rerun the chunk"
                        ) from None
                    if any(k != hardware for k in keys):
                        raise ValueError(
                            f"{pack}: {f.relative_to(tmp)} holds timings of {', '.join(keys)}, not only {hardware}'s; "
                            "nothing was copied: GPUs' timings are never mixed (is this another GPU's chunk?)"
                        )
            kept = {f.relative_to(root) for f in files}
            removed = [s for s in sorted(dest.glob("*.msgpack.partial")) if s.relative_to(dest) not in kept]
            written = []
            for f in files:
                target = dest / f.relative_to(root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(f), target)  # same file system: a rename, each file whole or not at all
                written.append(target)
    for s in removed:
        s.unlink()
    return written, removed
