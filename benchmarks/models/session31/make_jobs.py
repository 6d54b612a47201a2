"""Job lists for ``cv_jobs.py``: per GPU and seed, one validation-set job and the folds of a
grouped cross-validation, all with the same ``TrainOptions`` overrides (``w`` orders the queue)."""


def jobs(tag, sets, hws=("NVIDIA-H100", "NVIDIA-H200"), seeds=(0,), folds=3, val=True, cv=True, weight=1.0):
    out = []
    for hw in hws:
        h = "h100" if "H100" in hw else "h200"
        for s in seeds:
            if val:
                out.append(
                    {"id": f"{tag}-{h}-val-s{s}", "hw": hw, "part": "val", "seed": s, "set": sets, "w": weight * 1.5}
                )
            if cv:
                for f in range(folds):
                    out.append(
                        {
                            "id": f"{tag}-{h}-cv{folds}f{f}-s{s}",
                            "hw": hw,
                            "part": "cv",
                            "seed": s,
                            "folds": folds,
                            "fold": f,
                            "set": sets,
                            "w": weight,
                        }
                    )
    return out
