"""Why an answer is wrong and when not to trust it: the verdicts and their report, the
counterfactual reruns, the confidence rule, and the exact match and answer scoring they rest on."""

from rag_core.analysis import scoring
from rag_core.analysis.diagnosis import confidence, counterfactual, diagnosis_report, verdicts
from rag_core.analysis.diagnosis.verdict_rules import VERDICTS
from rag_core.analysis.matching import exact_match

__all__ = [
    "VERDICTS",
    "confidence",
    "counterfactual",
    "diagnosis_report",
    "exact_match",
    "scoring",
    "verdicts",
]
