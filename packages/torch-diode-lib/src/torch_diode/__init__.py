"""torch-diode: learned kernel-config selection for torch.compile's GEMM autotuning.

Importing this package has no side effects on torch: it does not import ``torch._inductor``,
install a choices handler or change any config. The one exception is opt-in: when an
auto-registration plugin is installed (the ``torch-diode`` meta-wheel declares one in the
``torch_diode.plugins`` entry-point group), it runs once, here.
"""

from torch_diode._version import __version__
from torch_diode.errors import (
    CollectionError,
    DatasetFormatError,
    DiodeError,
    HardwareError,
    ModelFormatError,
    ModelNotFoundError,
    SchemaVersionError,
    TruncatedFileError,
)
from torch_diode.records import Choice, FailureRecord, Problem, Provenance, TimingRecord

__all__ = [
    "Choice",
    "CollectionError",
    "DatasetFormatError",
    "DiodeError",
    "FailureRecord",
    "HardwareError",
    "ModelFormatError",
    "ModelNotFoundError",
    "Problem",
    "Provenance",
    "SchemaVersionError",
    "TimingRecord",
    "TruncatedFileError",
    "__version__",
]
