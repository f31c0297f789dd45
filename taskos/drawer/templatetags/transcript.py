"""What a transcript entry shows of a tool's output, and text escaped for an element's
content only: every entry of a live run goes over the websocket (drawer/transcript.html)."""
from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# A tool result shows the lines of its preview that end within this many characters (at
# least the first line, cut here when longer); the rest of its output is a click away
# (static/js/taskos.js fetches it from the archive). Whole, the preview (400 characters
# of a 5 KB document) was over a third of a long run's transcript bytes.
PREVIEW_HEAD_CHARS = 120


@register.filter
def preview_head(preview: str) -> str:
    """The head of `preview` shown before it is opened: whole lines within
    PREVIEW_HEAD_CHARS, else the first line's first PREVIEW_HEAD_CHARS characters."""
    if len(preview) <= PREVIEW_HEAD_CHARS:
        return preview
    end = preview.rfind("\n", 0, PREVIEW_HEAD_CHARS + 1)
    return preview[:end] if end > 0 else preview[:PREVIEW_HEAD_CHARS]


@register.filter
def element_text(value: Any) -> SafeString:
    """`value` escaped for an element's content (&, <, >): quotes need no escape there, and
    tool arguments are mostly quotes ({&quot;topic&quot;: …} took 40 bytes a call)."""
    text = str(value)
    return mark_safe(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))
