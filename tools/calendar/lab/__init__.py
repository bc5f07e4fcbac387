"""The calendar domain's lab: scenarios, scripted policies, the verifier, the GRPO environment, drills and probes (never loaded to serve a user)."""
