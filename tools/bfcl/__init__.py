"""BFCL v4 multi-turn (Berkeley Function-Calling Leaderboard) as a second domain: a benchmark
nobody here wrote, with its own executable worlds and scored by its own checker.

``data`` reads the cases from the ``bfcl-eval`` package, ``world`` builds BFCL's classes and our
tools from its function docs, ``checker`` calls BFCL's multi-turn checker, ``oracle`` replays the
ground truth, ``eval_suite`` puts them together for ``python -m agent eval --domain bfcl``.
"""
