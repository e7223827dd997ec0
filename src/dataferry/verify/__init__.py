"""Verification: the crash-point harness (and, later, the store capability probe)."""

from .crash import CrashReport, verify_crash

__all__ = ["CrashReport", "verify_crash"]
