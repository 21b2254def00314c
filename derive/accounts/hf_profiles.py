"""The names of the report's transformers profiles, apart from their accounts (derive.accounts.hf_saved).

The report, the CLI and derive.formulas check a ``--profile`` against these names on every run;
the tables behind them (every family transformers trains) load only when such a profile is asked.
"""
from __future__ import annotations

#: The report's transformers profiles: the family comes from the config.
HF_PROFILES: dict[str, str] = {
    "hf-sdpa": "the whole model as transformers 5.23 trains it (sdpa attention; family from the config)",
    "hf-eager": "the whole model as transformers 5.23 trains it (eager attention; family from the config)",
}
#: transformers 5's experts implementations derive models (integrations/moe.py
#: grouped_mm_experts_forward, the default; eager: the modeling file's loop over experts);
#: derive.accounts.hf_saved checks them against derive.architectures.operations.experts.EXPERTS on import.
EXPERTS_IMPLEMENTATIONS: tuple[str, ...] = ("grouped_mm", "eager")
