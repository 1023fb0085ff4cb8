"""sessiontree: fast, Pi-compatible append-only session trees for LLM coding agents.

The heavy lifting (scanning, indexing, walking, cutting) lives in the Rust extension
``sessiontree._core``; this package is the public Python API over it.
"""
from __future__ import annotations

__version__ = "0.1.0"
