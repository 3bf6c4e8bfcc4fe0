"""The Qwen2-VL actor-critic (extra ``vlm``) and the two ways of generating its actions.

* :mod:`~cua_rl.policies.vlm.config`: :class:`~cua_rl.policies.vlm.config.VLMPolicyConfig`, the
  ``policy.vlm`` section of a training config (no torch).
* :mod:`~cua_rl.policies.vlm.policy`: :class:`~cua_rl.policies.vlm.policy.VLMPolicy` (prompts,
  in-process generation, log-probs and values of generated ids).
* :mod:`~cua_rl.policies.vlm.served`: :class:`~cua_rl.policies.vlm.served.ServedGenerator`
  (generation by an OpenAI-compatible server that gets the adapter after every update).
* :mod:`~cua_rl.policies.vlm.text`: action text and thought tokens (no torch).

Both generators implement :class:`cua_rl.training.learner.Generator`. Importing this package
imports neither torch nor transformers.
"""

__all__: list[str] = []
