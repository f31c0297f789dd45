"""The error quick reference (feature W8): every known error gets a cause and an action."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.events import ErrorEvent


@dataclass(frozen=True)
class ErrorAdvice:
    cause: str
    action: str


REFERENCE: dict[str, ErrorAdvice] = {
    "context_length_exceeded": ErrorAdvice(
        "The request was longer than the model's window (the provider counted more tokens "
        "than the budget allowed, or the window is set larger than the model's real one).",
        "TaskOS compacted the history and retried. If it repeats, set the profile's "
        "context_size to the model's real window or lower trigger_ratio."),
    "output_overflow": ErrorAdvice(
        "The model's answer filled the window: the request fitted (the server's own count "
        "says so), but the server writes tool-call arguments without a length limit "
        "(llama-cpp-python's chatml-function-calling format) and the model looped in them.",
        "TaskOS compacted the history, so the model continues from a shorter, different "
        "conversation, and asked again; its count of the window is unchanged. If it "
        "repeats, lower the temperature or use a stronger model."),
    "exact_count_lost": ErrorAdvice(
        "Token counts were exact (the server's own tokenizer confirmed them) until the "
        "server's tokenizer stopped answering or its reports disagreed with the engine's "
        "rendering of the request; the message says which.",
        "From that call on the counts are calibrated from the server's usage, or estimated "
        "until it reports some, and labelled so. A tokenizer that stops answering is often "
        "a single-slot server busy with a long answer: lower the profile's output reserve "
        "or use a server with more slots."),
    "tools_not_rendered": ErrorAdvice(
        "The server's chat template does not render tools: its count of a request with "
        "tools equals the request without them, so the model never sees a tool.",
        "Start llama-cpp-python with --chat_format chatml-function-calling, llama-server "
        "with --jinja, or Ollama with a tools-capable model; or run the task with tools "
        "off. Counts are calibrated from usage from that call on."),
    "finish_reason_length": ErrorAdvice(
        "The answer hit the output limit (max_tokens) and was cut off.",
        "TaskOS raised the output reserve and asked the model to continue; raise the "
        "output reserve for long reports."),
    "kv_cache_allocation": ErrorAdvice(
        "The local model server could not allocate its KV cache for this context length.",
        "Lower the context size (num_ctx for Ollama, --ctx-size for llama.cpp) or the "
        "window in the profile, or free GPU memory."),
    "deadline_exceeded": ErrorAdvice(
        "The model call took longer than the profile's timeouts (context deadline exceeded).",
        "TaskOS retried within the session's retry budget. Long prompts take long to "
        "prefill: lower the window or raise the profile's read/call timeouts; check that "
        "the server is not overloaded."),
    "insecure_context": ErrorAdvice(
        "The browser refused a feature because the page is not a secure context "
        "(served over plain HTTP from a non-localhost address).",
        "Open TaskOS through https or via localhost / 127.0.0.1."),
    "turn_interrupted": ErrorAdvice(
        "The worker running this session stopped (killed, restarted or lost its lease) in "
        "the middle of a turn, before the turn was committed.",
        "Nothing committed is lost: the half-done turn was undone and runs again from the "
        "last committed state. Model calls it already made are kept as discarded events."),
    "auth": ErrorAdvice("The endpoint refused the API key.",
                        "Set the environment variable named by the profile's api_key_env."),
    "rate_limited": ErrorAdvice("The provider is rate-limiting this key.",
                                "TaskOS retried with backoff, honouring Retry-After, within "
                                "the session's retry budget; wait or raise your quota."),
    "provider_error": ErrorAdvice("The model server failed (5xx).",
                                  "TaskOS retried; check the server's logs if it persists."),
    "connection": ErrorAdvice("The model endpoint could not be reached.",
                              "Check the profile's base_url and the network."),
    "bad_request": ErrorAdvice("The endpoint rejected the request.",
                               "Read the message: often an unknown model name or parameter."),
    "bad_response": ErrorAdvice("The model's answer could not be used (empty or malformed).",
                                "TaskOS asked again; a weaker model may need a simpler prompt."),
    "malformed_response": ErrorAdvice(
        "The endpoint's answer was cut off mid-body, was not JSON or held no choices.",
        "TaskOS waited and asked again within the session's retry budget; if it persists, "
        "check the server or a proxy in front of it."),
    "profile_invalid": ErrorAdvice(
        "The session's model profile cannot work: a number of it is out of its range, or "
        "its base URL is not http or https, or names a host the operator does not allow (a "
        "loopback or private address on a profile not marked local, a link-local or cloud "
        "metadata address, the broker's or the database's port).",
        "Nothing was retried. Correct the profile in the admin (Runs → Model profiles; the "
        "message names the field), or ask the operator to list the host in "
        "TASKOS_MODEL_HOSTS, then start a new session."),
    "settings_invalid": ErrorAdvice(
        "The session's context settings are out of range or are not settings at all (a "
        "stored row changed behind the forms).",
        "Start a new session with settings the start form accepts; the message names the "
        "setting and its range."),
    "key_env_refused": ErrorAdvice(
        "The profile's api_key_env names a variable that may not hold a model key.",
        "Put the key in a variable named TASKOS_KEY_<NAME> (or ask the operator to list it "
        "in TASKOS_ALLOWED_KEY_ENVS) and set api_key_env to that name."),
    "answer_incomplete": ErrorAdvice(
        "The final answer was still cut off by the output limit after every allowed "
        "continuation.",
        "The pieces are in the archive. Raise the profile's context size or ask for a "
        "shorter answer (e.g. a summary table first, details in files)."),
    "input_too_long": ErrorAdvice(
        "A goal or message was longer than the limit (TASKOS_MAX_INPUT_CHARS).",
        "Put long material in a file of the session's workspace and refer to it."),
    "summary_failed": ErrorAdvice(
        "The summary call failed or returned an invalid or too long summary.",
        "TaskOS fell back to truncating the oldest messages (all raw messages stay in the "
        "archive). Consider a stronger summary model."),
    "words_over_share": ErrorAdvice(
        "The person's own messages alone are larger than their share of the input limit "
        "(words_share), so the oldest could not all be sent verbatim.",
        "First, losing nothing, a sentence said again is given once and sentences that "
        "differ only in a figure are given once with their figures listed. If that is still "
        "too long, the newest messages are sent whole and the model condenses the oldest into the "
        "requirements in force, each line checked against the message it cites; a sentence "
        "no line covers stays verbatim, and where that cannot be done they are cut to the "
        "room the request leaves (constraint sentences first, then the least repeated "
        "ones), what is left out marked. The full texts stay in the archive. "
        "Raise words_share or the window, or put long material in a workspace file."),
    "words_over_window": ErrorAdvice(
        "The person's requirements alone (their hard-constraint sentences) are more than any "
        "request can carry at this window beside the system prompt, the tool schemas, the "
        "task snapshot and the output reserve.",
        "The session goes on: each request carries the newest messages' requirements that "
        "fit, in order, and every message says in the block how many of its sentences and "
        "requirements it leaves out and where its full text is; the drawer marks each call "
        "whose request misses one. Use a larger window, or state fewer, shorter "
        "requirements (a long list is better as a workspace file the agent reads)."),
    "summary_skipped": ErrorAdvice(
        "No summary was requested: beside the newest rounds it would not fit the next "
        "request, so the model's work on it would never be sent.",
        "TaskOS truncated the oldest messages instead (all raw messages stay in the "
        "archive). A larger window leaves room for a summary."),
    "compaction_failed": ErrorAdvice(
        "History could not be shrunk: the summary failed and truncation is disabled.",
        "Enable compression_fallback_to_truncation or fix the summary model."),
    "preflight_failed": ErrorAdvice(
        "The system prompt, tool schemas, goal with its hard constraints and the output "
        "reserve do not fit the window together, so no request could ever be sent.",
        "Use a larger window, offer fewer tools or shorten the system prompt; the message "
        "names the largest part."),
    "request_too_large": ErrorAdvice(
        "After compaction, summary shrinking and cutting the longest messages the request "
        "was still over the window minus the output reserve, so it was not sent.",
        "Use a larger window, fewer tools or a shorter system prompt."),
    "audit_failed": ErrorAdvice(
        "A hard constraint the person stated is missing from the request after a "
        "compaction, or the summary holds a figure that no archived message or tool result "
        "contains.",
        "Check the summary in the drawer; pin the constraint from the transcript."),
    "unusable_answer": ErrorAdvice(
        "The model's answer without tool calls could not be the final answer: it was a tool "
        "call written as JSON text naming no tool of the task, it only repeated the "
        "engine's own notes (hints, task snapshot, summary, system prompt; escaped or not), "
        "it only repeated a tool's error message, it asked a question back or restated the "
        "task, or it held nothing of the tool results or the person's messages where it "
        "had to (on the tool-free answer turn, and on weak profiles). The message quotes "
        "what it wrote.",
        "TaskOS asked once more (not on the tool-free answer turn), then stopped. Weak models need a tool-calling chat template "
        "(llama-server --jinja) or a stronger model; offer fewer tools."),
    "tool_retry_loop": ErrorAdvice(
        "The model kept repeating the same failing tool call after the hint told it to stop.",
        "Read the tool's error in the transcript; fix the data or the tool, or use a "
        "stronger model. The limit is twice tool_retries_limit."),
    "tool_repeat_loop": ErrorAdvice(
        "The model kept making the same successful tool call, with the same arguments, "
        "after the hint told it that the result was already in its context.",
        "Weak models forget they have a result: use a stronger model, offer fewer tools, or "
        "lower the temperature. The limit is twice tool_retries_limit calls in a row."),
    "turn_limit": ErrorAdvice("The task used all its turns without a final answer.",
                              "Raise max_turns or split the task."),
    "worker_lost": ErrorAdvice("The worker running this task stopped.",
                               "Start the task again: it resumes from the last saved turn."),
    "storage_error": ErrorAdvice(
        "The database could not store the session's progress: the disk is full, the "
        "database is read-only or stayed locked, or its server could not be reached.",
        "Fix what the message names (free disk space, make the database writable, bring "
        "the server back), then start the task again; every turn committed before the "
        "error is kept and shown here."),
    "internal": ErrorAdvice("An unexpected error inside TaskOS.",
                            "Check the worker log; everything saved so far is kept."),
    "internal_error": ErrorAdvice(
        "An unexpected error in the engine or the worker.",
        "Everything up to the last committed turn is saved; see the worker log for the "
        "traceback, then start a new session."),
    "replay_decision_impossible": ErrorAdvice(
        "A replay played a recorded decision that refers to something (an archive ref) the "
        "replayed context no longer holds: under these settings the model could not have "
        "made it.",
        "Read the turn it names: from there on the replay shows what the recorded decisions "
        "cost, not what a model would have done. Try a larger window or a later trigger."),
}


def advise(code: str) -> ErrorAdvice:
    return REFERENCE.get(code, REFERENCE["internal"])


def error_event(code: str, message: str, *, fatal: bool, **extra: Any) -> ErrorEvent:
    """An ERROR event with the cause and the action the quick reference gives `code`."""
    advice = advise(code)
    return ErrorEvent(code=code, message=message, cause=advice.cause, action=advice.action,
                      fatal=fatal, **extra)
