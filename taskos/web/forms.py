"""Forms of the dashboard; every mistake a person can make gets a message by its field."""
from __future__ import annotations

from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms

from agents import (WINDOW, ConfigError, ContextConfig, ScenarioError, TokenCounter,
                    default_registry, list_scenarios, load_scenario, plan_budget, storable_text)
from taskos.runs.models import ModelProfile, input_too_long
from taskos.runs.tool_sources import ToolSource
from taskos.workspaces.forms import StartFilesForm

MIN_WINDOW, MAX_WINDOW = int(WINDOW.low), int(WINDOW.high)  # the engine's range (issue 25)
DEFAULTS = ContextConfig()
MAX_TURNS = ContextConfig.bounds_of("max_turns")
# The ContextConfig knobs the form offers, in the order it shows them.
KNOBS = ("trigger_ratio", "reserve_ratio", "context_buffer_ratio", "tool_result_limit",
         "max_rounds", "compression_fallback_to_truncation", "compression_tool_enabled",
         "delegation_enabled", "timezone")


class PersonText(forms.CharField):
    """A person's text, taken with a NUL shown as "␀" as the engine and the store keep it
    (agents/storable.py), where Django's own CharField refuses it (issue 25 item 4)."""

    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        return storable_text(value) if isinstance(value, str) else value


class ProfileChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: ModelProfile) -> str:
        if obj.simulated:
            return f"{obj.name} — simulated, no key or network ({obj.effective_window:,} tokens)"
        warning = " — window unknown, 128k assumed!" if obj.window_warning else ""
        return f"{obj.name} — {obj.model} ({obj.effective_window:,} tokens){warning}" \
               f"{check_label(obj)}"


def check_label(profile: ModelProfile) -> str:
    """The stored model check in a few words, for the profile's choice."""
    result = profile.check_result
    if result is None:
        return " — not checked"
    if profile.tools_failed is not None:
        return " — check: tools off (template drops tools)"
    failed = [c.label for c in result.capabilities if c.verdict == "fail"]
    return f" — check failed: {', '.join(failed)}" if failed else " — check passed"


def scenario_label(name: str) -> str:
    """"long-200 · 204 steps · 128k window": enough to choose without opening the file."""
    try:
        scenario = load_scenario(name)
    except ScenarioError:
        return name
    return f"{name} · {len(scenario.model_steps)} steps · {scenario.window // 1000}k window"


class NewSessionForm(StartFilesForm):  # StartFilesForm: its files and copied workspace (T9)
    goal = PersonText(
        required=False, widget=forms.Textarea(attrs={"rows": 3, "placeholder":
                                                     "What should the agent do?"}),
        help_text="Optional when a scenario is chosen: the scenario's goal is used.")
    goal_over_share = False  # set by clean(): the goal is larger than the words' share
    long_goal_ok = forms.BooleanField(
        required=False, label="Start anyway: the oldest part of my words past their share "
                              "is condensed (the full text stays in the archive)")
    scenario = forms.ChoiceField(required=False, help_text="A bundled script the simulated "
                                 "model plays (it also works as a goal for a real model). "
                                 "The simulated model can only play scenarios: given a "
                                 "free-text goal alone it looks at the workspace and says it cannot work on it.")
    profile = ProfileChoiceField(queryset=ModelProfile.objects.all(), empty_label=None)
    window = forms.IntegerField(
        required=False, min_value=MIN_WINDOW, max_value=MAX_WINDOW,
        help_text="Context window in tokens. Empty: the scenario's window, else the "
                  "profile's context size. A small window makes compactions happen early.")
    trigger_ratio = forms.FloatField(initial=DEFAULTS.trigger_ratio,
                                     help_text="Compact when input exceeds this share of the "
                                               "window (0 < x ≤ 0.9).")
    reserve_ratio = forms.FloatField(initial=DEFAULTS.reserve_ratio,
                                     help_text="Share of the window kept as recent history "
                                               "after a compaction.")
    context_buffer_ratio = forms.FloatField(initial=DEFAULTS.context_buffer_ratio,
                                            help_text="Width of the warning band below the "
                                                      "trigger line.")
    tool_result_limit = forms.IntegerField(initial=DEFAULTS.tool_result_limit,
                                           help_text="Tokens of one tool result kept in "
                                                     "context; the rest is offloaded.")
    max_rounds = forms.IntegerField(initial=DEFAULTS.max_rounds,
                                    help_text="Tool rounds kept before the rolling window "
                                              "compacts.")
    compression_fallback_to_truncation = forms.BooleanField(
        required=False, initial=DEFAULTS.compression_fallback_to_truncation,
        help_text="If a summary fails, truncate the oldest messages instead.")
    compression_tool_enabled = forms.BooleanField(
        required=False, initial=DEFAULTS.compression_tool_enabled,
        help_text="Let the model call compress_context itself.")
    delegation_enabled = forms.BooleanField(
        required=False, initial=DEFAULTS.delegation_enabled, label="Sub-agents",
        help_text="Offer the delegate tool: sub-tasks run as child sessions with their own "
                  "clean context and budget; only their answers come back.")
    timezone = forms.CharField(initial=DEFAULTS.timezone, max_length=64,
                               help_text="IANA zone for the time hint, e.g. Europe/Berlin.")
    max_turns = forms.IntegerField(required=False, min_value=int(MAX_TURNS.low),
                                   max_value=int(MAX_TURNS.high),
                                   help_text=f"Turns before the session stops without an "
                                             f"answer. Empty: {DEFAULTS.max_turns}.")
    tools = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Tools offered to the model; none ticked: all (or the scenario's). Every "
                  "schema costs window: all 16 take about 1,900 tokens, half of a 4k window.")
    ask_first = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Ask before",
        help_text="Tools whose every call waits for your approval in the drawer (Approve, or "
                  "Deny with a reason the model reads); the session holds no worker meanwhile.")

    tool_sources = forms.ModelMultipleChoiceField(
        queryset=ToolSource.objects.none(), required=False,
        widget=forms.CheckboxSelectMultiple, label="Tool sources",
        help_text="MCP servers whose tools are offered beside the built-ins (T10); only the "
                  "ones open to you are listed. Their schemas count in the window.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tool_sources"].queryset = ToolSource.objects.usable_by(self.owner)
        self.fields["scenario"].choices = [("", "— none: use the goal —")] + [
            (name, scenario_label(name)) for name in list_scenarios()]
        self.fields["tools"].choices = [(name, name) for name in default_registry().names()]
        self.fields["ask_first"].choices = self.fields["tools"].choices
        simulated = next((p for p in self.fields["profile"].queryset if p.simulated), None)
        if simulated is not None:
            self.fields["profile"].initial = simulated.pk

    def profile_checks(self) -> list[dict[str, str]]:
        """What the model check found for each real profile, shown beside the choice: the
        verdicts, and why a session on it starts with tools off."""
        return [{"name": p.name, "summary": p.check_summary(), "tools_off": p.tools_off_notice()}
                for p in self.fields["profile"].queryset if not p.simulated]

    def clean_goal(self) -> str:
        return refuse_too_long(self.cleaned_data.get("goal") or "", "goal")

    def clean_timezone(self) -> str:
        name = self.cleaned_data["timezone"].strip()
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(
                f"Unknown time zone {name!r}: use an IANA name such as UTC or Asia/Shanghai.")
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        scenario = data.get("scenario") or ""
        if not (data.get("goal") or "").strip() and not scenario:
            self.add_error("goal", "Give a goal or choose a scenario.")
        scenario_window = None
        if scenario:
            try:
                scenario_window = load_scenario(scenario).window
            except ScenarioError as exc:
                self.add_error("scenario", str(exc))
        self._check_knobs(data)
        profile = data.get("profile")
        window = data.get("window") or scenario_window or (profile.effective_window if profile else None)
        if window and profile and window > profile.effective_window:
            self.add_error("window", f"The window ({window:,} tokens) is larger than the context "
                                     f"size of profile {profile.name!r} ({profile.effective_window:,}).")
        data["window"] = window
        self._check_goal_share(data.get("goal") or "", window, bool(data.get("long_goal_ok")))
        return data

    def _check_goal_share(self, goal: str, window: int | None, accepted: bool) -> None:
        """Said before the start (C19): a goal larger than the person's words' share of
        this window cannot be sent whole; the person decides whether to start anyway."""
        self.goal_over_share = False
        if not goal or not window or "goal" in self.errors:
            return
        share = plan_budget(window, DEFAULTS).words_share
        if len(goal) < share * 2:  # under two characters a token it fits: no count needed
            return
        tokens = goal_counter().text(goal)
        if tokens <= share:
            return
        self.goal_over_share = True
        if not accepted:
            self.add_error("goal", (
                f"This goal is about {tokens:,} tokens. At a window of {window:,} tokens the "
                f"person's words are sent whole up to {share:,} tokens (words_share "
                f"{DEFAULTS.words_share:g} of the input limit); past that the older messages "
                "are condensed by the model into the requirements in force, each line checked "
                "against the message it cites (a sentence no line covers stays verbatim; "
                "where even that does not fit, it is cut to the room left: its constraint "
                "sentences first, then its least repeated ones, the rest marked as left out), "
                "the full text one read_ref away. Use a larger window, put the "
                "material in a workspace file, or tick \"Start anyway\"."))

    def _check_knobs(self, data: dict[str, Any]) -> None:
        """Validate each knob alone, by the engine's own check, so an error lands on the
        field that caused it."""
        for name in KNOBS:
            if name not in data or name in self.errors:
                continue
            try:
                ContextConfig.check(name, data[name])
            except ConfigError as exc:
                self.add_error(name, str(exc))

    def context_settings(self) -> dict[str, Any]:
        extra = {"tools": list(self.cleaned_data.get("tools") or [])}
        if self.cleaned_data.get("max_turns"):
            extra["max_turns"] = self.cleaned_data["max_turns"]
        return ContextConfig(**{name: self.cleaned_data[name] for name in KNOBS},
                             **extra).to_dict()


@lru_cache(maxsize=1)
def goal_counter() -> TokenCounter:
    return TokenCounter()


def refuse_too_long(text: str, what: str) -> str:
    """`text`, or a form error when it is over TASKOS_MAX_INPUT_CHARS (it is never stored)."""
    reason = input_too_long(text, what)
    if reason:
        raise forms.ValidationError(reason)
    return text


class MessageForm(forms.Form):
    text = PersonText(strip=True, widget=forms.Textarea(attrs={"rows": 2}),
                      error_messages={"required": "The message is empty."})

    def clean_text(self) -> str:
        return refuse_too_long(self.cleaned_data["text"], "message")


FOCUS_MAX_CHARS = 2000


class CompactForm(forms.Form):
    instructions = PersonText(
        required=False, max_length=FOCUS_MAX_CHARS, strip=True,
        widget=forms.TextInput(attrs={"placeholder": "focus (optional)"}),
        error_messages={"max_length": f"A focus holds at most {FOCUS_MAX_CHARS:,} characters "
                                      "(this one has %(show_value)s): shorten it and send it "
                                      "again."})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # No maxlength in the page: the browser cut a pasted focus without a word, and the
        # compaction ran on the first 2,000 characters; the server's refusal says why.
        self.fields["instructions"].widget.attrs.pop("maxlength", None)
