"""Kinds of target a run calls, behind one seam (tickwork.targets.base): HTTP today (tickwork.targets.http)."""
