"""GEMM shape sources: shape sets (JSON), seeded samplers, and extraction from real models."""
