"""The one place the torch-diode version is defined (all three wheels read it at build time)."""

__version__ = "0.1.0"
