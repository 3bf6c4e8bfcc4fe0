"""``make demo`` / ``cua-rl demo``: the whole pipeline on SimDesk, in a few minutes on 2 cores.

* :mod:`cua_rl.demo.survey`: every SimDesk task family with the scripted expert, a sloppy expert
  and a random policy (``cua-rl demo --desktop-only``);
* :mod:`cua_rl.demo.steps`: the building blocks (a held-out labelled set and the calibration of
  the judge on it, reference models of the training tasks, greedy evaluation, success intervals,
  learning curves), also used by ``benchmarks/reward_correction.py``;
* :mod:`cua_rl.demo.pipeline`: :func:`~cua_rl.demo.pipeline.run_pipeline`, the stages in order
  and the summary.
"""
