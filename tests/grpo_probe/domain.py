"""The calendar domain itself (``python -m agent`` checks a domain's settings before any command)."""

from tools.calendar.domain import load_domain, load_settings

__all__ = ["load_domain", "load_settings"]
