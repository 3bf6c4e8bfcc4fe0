"""Policies: the compact SB3 feature extractor (``cnn``) and the Qwen2-VL actor-critic (``vlm``).

``import cua_rl.policies`` does not import torch; import :mod:`cua_rl.policies.cnn` for the
extractor and :mod:`cua_rl.policies.vlm.policy` for ``VLMPolicy`` (extra ``vlm``).
"""

__all__: list[str] = []
