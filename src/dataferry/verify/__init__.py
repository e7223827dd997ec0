"""Verification: the referee (crash points, dead drivers, zombie attempts, racing jobs, each on
fresh destinations and over existing data) and the store capability probe."""

from .crash import CrashReport, verify_crash

__all__ = ["CrashReport", "verify_crash"]
