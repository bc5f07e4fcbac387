"""llama.cpp in-process backend: own chat template, KV prefix reuse, per-session states, lazy grammar.

One job per module:

- ``engine``: loading the checked files (``ModelFiles``), tokens and their pieces, the context,
  identity and fingerprints;
- ``states``: which part of a prompt the context (or a session's saved state) already holds, and
  the saved-state LRU;
- ``disk_states``: those states as files that outlive the process (the static prefix, each chat's
  state at a clean shutdown), checked before llama.cpp sees a byte;
- ``decode``: samplers, three-stage constrained sampling, the lazy-grammar decode loop and its
  trigger;
- ``backend``: ``LlamaBackend``, the ``Backend`` that puts them together behind one lock.
"""

from agent.backends.llama.backend import LlamaBackend
from agent.backends.llama.decode import Decoder, Generated, generate
from agent.backends.llama.engine import Engine, ModelFiles, ModelRefused
from agent.backends.llama.states import PrefixCache, SavedStates, SessionState, common_prefix

__all__ = [
    "Decoder",
    "Engine",
    "Generated",
    "LlamaBackend",
    "ModelFiles",
    "ModelRefused",
    "PrefixCache",
    "SavedStates",
    "SessionState",
    "common_prefix",
    "generate",
]
