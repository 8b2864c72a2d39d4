"""Interop: Tickwork delivering real scheduled runs to stock server software started on this machine."""
