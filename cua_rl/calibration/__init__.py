"""Judge calibration: labelled sets, error-rate estimators with intervals, Calibration, report.

The main entry point is :func:`estimate_calibration` (verdicts + labels -> :class:`Calibration`);
:func:`calibrate_judge` runs a judge over a labelled set first. :func:`build_simdesk_labelled` and
:func:`build_labelled_from_env` make labelled sets; :func:`run_calibration` (module ``run``) is
what ``cua-rl calibrate`` runs.
"""

from cua_rl.calibration.builders import (
    CALIBRATION_SEED_START,
    build_labelled_from_env,
    build_simdesk_labelled,
    class_balance,
    format_class_balance,
    simdesk_expert_policy,
)
from cua_rl.calibration.calibration import (
    SCHEMA_VERSION,
    Calibration,
    calibrate_judge,
    estimate_calibration,
    stratum_label,
)
from cua_rl.calibration.estimators import (
    ConfusionCounts,
    binomial_interval,
    bootstrap_rates,
    bootstrap_statistic,
    clopper_pearson_interval,
    confusion_counts,
    d_interval,
    percentile_interval,
    rogan_gladen,
    rogan_gladen_se,
    wilson_interval,
    z_value,
)
from cua_rl.calibration.labelled import (
    LABELLED_KEYS,
    LabelledExample,
    check_both_classes,
    check_disjoint,
    load_labelled,
    save_labelled,
    split_by_task,
)
from cua_rl.calibration.report import plot_calibration, render_markdown, write_report
from cua_rl.calibration.simdesk_config import (
    SimDeskLabelledConfig,
    load_simdesk_labelled_config,
)

__all__ = [
    "CALIBRATION_SEED_START",
    "LABELLED_KEYS",
    "SCHEMA_VERSION",
    "Calibration",
    "ConfusionCounts",
    "LabelledExample",
    "SimDeskLabelledConfig",
    "binomial_interval",
    "bootstrap_rates",
    "bootstrap_statistic",
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
    "load_labelled",
    "load_simdesk_labelled_config",
    "percentile_interval",
    "plot_calibration",
    "render_markdown",
    "rogan_gladen",
    "rogan_gladen_se",
    "save_labelled",
    "simdesk_expert_policy",
    "split_by_task",
    "stratum_label",
    "wilson_interval",
    "write_report",
    "z_value",
]
