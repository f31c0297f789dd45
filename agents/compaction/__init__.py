"""Compaction and summaries (features C3, C6, C7, C13, C14, E3): folding old history into a
structured summary, and checking what that left.

`compactor` sizes and sends the summary requests (falling back to truncation), `summary`
and `summary_text` read and merge what a model answers, `hooks` runs the on-compress hooks,
`fresh_requests` builds tool-free requests for weak models. Two checks: `self_check` is
the engine's own look at the context it just built; `source_audit` reads the archive and
audits the next request against what the person and the tools really said; `probes`
asks a model questions after a compaction.
"""
from agents.compaction.compactor import CompactionFailed, CompactionOutcome, Compactor
from agents.compaction.hooks import CompactionMetrics, CompressCall, CompressHook
from agents.compaction.source_audit import SourceAudit
from agents.compaction.summary import StructuredSummary, render

__all__ = ["CompactionFailed", "CompactionMetrics", "CompactionOutcome", "Compactor",
           "CompressCall", "CompressHook", "SourceAudit", "StructuredSummary", "render"]
