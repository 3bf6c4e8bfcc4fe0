"""Signal-driven observation (issue 17): re-read the screen only when something happened.

Modules: :mod:`~cua_rl.observation.signals` (cheap detectors), :mod:`~cua_rl.observation.compress`
(compact, task-conditioned observation forms), :mod:`~cua_rl.observation.sdo` (the
:class:`SignalDrivenObservation` wrapper and its counters).
"""

from cua_rl.observation.compress import (
    A11yFilter,
    CompactObservation,
    Compressor,
    RawA11y,
    Screenshot,
    VLMSummary,
    count_tokens,
    image_tokens,
)
from cua_rl.observation.sdo import SDOCounters, SDOStep, SignalDrivenObservation, simdesk_masks
from cua_rl.observation.signals import (
    DEFAULT_TRIGGERS,
    SIGNAL_KINDS,
    Signal,
    SignalConfig,
    SignalDetector,
    action_reach,
    interactive_elements,
    screen_delta,
    sketch,
)

__all__ = [
    "DEFAULT_TRIGGERS",
    "SIGNAL_KINDS",
    "A11yFilter",
    "CompactObservation",
    "Compressor",
    "RawA11y",
    "SDOCounters",
    "SDOStep",
    "Screenshot",
    "Signal",
    "SignalConfig",
    "SignalDetector",
    "SignalDrivenObservation",
    "VLMSummary",
    "action_reach",
    "count_tokens",
    "image_tokens",
    "interactive_elements",
    "screen_delta",
    "simdesk_masks",
    "sketch",
]
