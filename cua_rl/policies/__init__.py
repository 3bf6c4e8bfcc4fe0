"""Policies: the compact SB3 feature extractor (``cnn``); a VLM actor-critic comes later.

``import cua_rl.policies`` does not import torch; import :mod:`cua_rl.policies.cnn` for the
extractor.
"""

__all__: list[str] = []
