"""Tool registry and the domains that plug into it."""
