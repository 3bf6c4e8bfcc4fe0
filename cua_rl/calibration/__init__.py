"""Judge calibration: labelled sets, error-rate estimators with intervals, Calibration, report.

The main entry point is :func:`estimate_calibration` (verdicts + labels -> :class:`Calibration`);
:func:`calibrate_judge` runs a judge over a labelled set first. :func:`build_simdesk_labelled` and
:func:`build_labelled_from_env` (now in :mod:`cua_rl.datasets`, still exported here) make labelled
sets; :func:`run_calibration` (module ``run``) is what ``cua-rl calibrate`` runs.

Every name is imported lazily, on first use: ``import cua_rl.calibration`` loads no submodule
(and so neither scipy nor the judge cache).
"""

from cua_rl._lazy import lazy_exports

_EXPORTS = {
    "AuditSettings": "cua_rl.calibration.audit",
    "JudgeAudit": "cua_rl.calibration.audit",
    "LabelQueue": "cua_rl.calibration.audit",
    "audited_estimate": "cua_rl.calibration.audit",
    "pool_calibration": "cua_rl.calibration.audit",
    "Calibration": "cua_rl.calibration.calibration",
    "SCHEMA_VERSION": "cua_rl.calibration.calibration",
    "stratum_label": "cua_rl.calibration.calibration",
    "ConfusionCounts": "cua_rl.calibration.estimators",
    "binomial_interval": "cua_rl.calibration.estimators",
    "bootstrap_rates": "cua_rl.calibration.estimators",
    "bootstrap_statistic": "cua_rl.calibration.estimators",
    "clopper_pearson_interval": "cua_rl.calibration.estimators",
    "confusion_counts": "cua_rl.calibration.estimators",
    "d_interval": "cua_rl.calibration.estimators",
    "percentile_interval": "cua_rl.calibration.estimators",
    "rogan_gladen": "cua_rl.calibration.estimators",
    "rogan_gladen_se": "cua_rl.calibration.estimators",
    "wilson_interval": "cua_rl.calibration.estimators",
    "z_value": "cua_rl.calibration.estimators",
    "calibrate_judge": "cua_rl.calibration.fitting",
    "judge_labelled": "cua_rl.calibration.fitting",
    "run_calibration": "cua_rl.calibration.run",
    "estimate_calibration": "cua_rl.calibration.fitting",
    "LABELLED_KEYS": "cua_rl.calibration.labelled",
    "LabelledExample": "cua_rl.calibration.labelled",
    "check_both_classes": "cua_rl.calibration.labelled",
    "check_disjoint": "cua_rl.calibration.labelled",
    "load_labelled": "cua_rl.calibration.labelled",
    "save_labelled": "cua_rl.calibration.labelled",
    "split_by_task": "cua_rl.calibration.labelled",
    "plot_calibration": "cua_rl.calibration.report",
    "render_markdown": "cua_rl.calibration.report",
    "write_report": "cua_rl.calibration.report",
    "CALIBRATION_SEED_START": "cua_rl.datasets.common",
    "class_balance": "cua_rl.datasets.common",
    "format_class_balance": "cua_rl.datasets.common",
    "build_labelled_from_env": "cua_rl.datasets.from_env",
    "simdesk_expert_policy": "cua_rl.datasets.from_env",
    "build_simdesk_labelled": "cua_rl.datasets.simdesk",
    "SimDeskLabelledConfig": "cua_rl.datasets.simdesk_config",
    "load_simdesk_labelled_config": "cua_rl.datasets.simdesk_config",
}

__all__ = [
    "AuditSettings",
    "CALIBRATION_SEED_START",
    "LABELLED_KEYS",
    "SCHEMA_VERSION",
    "Calibration",
    "ConfusionCounts",
    "JudgeAudit",
    "LabelQueue",
    "LabelledExample",
    "SimDeskLabelledConfig",
    "binomial_interval",
    "bootstrap_rates",
    "bootstrap_statistic",
    "audited_estimate",
    "build_labelled_from_env",
    "build_simdesk_labelled",
    "calibrate_judge",
    "check_both_classes",
    "class_balance",
    "check_disjoint",
    "clopper_pearson_interval",
    "confusion_counts",
    "d_interval",
    "estimate_calibration",
    "format_class_balance",
    "judge_labelled",
    "load_labelled",
    "load_simdesk_labelled_config",
    "percentile_interval",
    "plot_calibration",
    "pool_calibration",
    "render_markdown",
    "rogan_gladen",
    "rogan_gladen_se",
    "run_calibration",
    "save_labelled",
    "simdesk_expert_policy",
    "split_by_task",
    "stratum_label",
    "wilson_interval",
    "write_report",
    "z_value",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
