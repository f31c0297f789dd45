"""The working context and its zones (features C1, C5, C9, C12, C17): what the next request
holds, zone by zone, and the limits it must keep.

`working` builds the request (layout by attention and by cache), `budget` sizes the
zones, `history` keeps messages with their token counts in units that never split,
`snapshot` renders the task snapshot, `hints` the hint blocks, and `limits` the checks
made before anything is sent.
"""
from agents.context.budget import Budget, plan_budget
from agents.context.hints import HintInjector
from agents.context.history import Msg, Unit
from agents.context.limits import PreflightError, RequestTooLarge
from agents.context.snapshot import render_snapshot
from agents.context.working import ANNOTATIONS, Request, WorkingContext

__all__ = ["ANNOTATIONS", "Budget", "HintInjector", "Msg", "PreflightError", "Request",
           "RequestTooLarge", "Unit", "WorkingContext", "plan_budget", "render_snapshot"]
