"""Evaluation: scenarios from the domain, a simulated user, a verifier, summaries and comparisons."""
