"""The simulated provider's prompt cache and the money the run report derives from it."""
from agents.config import ModelProfile
from agents.counting.pricing import PRICE_TABLES, CostMeter, PriceTable
from agents.counting.tokens import TokenCounter
from agents.sim.cache import (LOOKBACK_BLOCKS, BreakpointCache, PromptCache, billable_cached,
                               read_marks)

COUNTER = TokenCounter()
TOOLS = [{"type": "function", "function": {"name": "fetch", "description": "Fetch a page.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def cache() -> PromptCache:
    return PromptCache(COUNTER.message, COUNTER.tools)


def msg(role: str, words: int, tag: str = "x") -> dict:
    return {"role": role, "content": " ".join(f"{tag}{i}" for i in range(words))}


def test_cached_counts_from_1024_tokens_in_128_token_blocks():
    assert billable_cached(1023) == 0
    assert billable_cached(1024) == 1024
    assert billable_cached(1151) == 1024
    assert billable_cached(1152) == 1152
    assert billable_cached(1500) == 1408


def test_a_request_repeating_an_earlier_prefix_is_cached_up_to_where_it_differs():
    c = cache()
    system, history = msg("system", 600, "s"), msg("user", 600, "h")
    assert c.cached_tokens([system, history, msg("user", 5, "tail1")], TOOLS) == 0
    shared = COUNTER.tools(TOOLS) + COUNTER.message(system) + COUNTER.message(history)
    assert shared >= 1024
    cached = c.cached_tokens([system, history, msg("user", 700, "new")], TOOLS)
    assert cached == billable_cached(shared)


def test_the_prefix_may_come_from_any_earlier_request_not_only_the_last():
    c = cache()
    a, b = msg("system", 900, "a"), msg("user", 400, "b")
    c.cached_tokens([a, b], None)
    c.cached_tokens([msg("system", 50, "other")], None)
    assert c.cached_tokens([a, b, msg("user", 3)], None) == billable_cached(
        COUNTER.message(a) + COUNTER.message(b))


def test_tools_come_first_so_changing_them_loses_the_whole_prefix():
    c = cache()
    a, b = msg("system", 900, "a"), msg("user", 400, "b")
    c.cached_tokens([a, b], TOOLS)
    assert c.cached_tokens([a, b], None) == 0
    assert c.cached_tokens([a, b], TOOLS) > 1024


def test_a_short_shared_prefix_is_not_cached():
    c = cache()
    small = msg("system", 100)
    c.cached_tokens([small, msg("user", 900, "one")], None)
    assert c.cached_tokens([small, msg("user", 900, "two")], None) == 0


def test_price_tables_bill_cached_input_cheaper_and_cache_writes_dearer():
    openai, anthropic = PRICE_TABLES["openai-like"], PRICE_TABLES["anthropic-like"]
    assert openai.cost(1_000_000, 0, 0) == 2.00
    assert openai.cost(1_000_000, 1_000_000, 0) == 0.50
    assert openai.cost(0, 0, 1_000_000) == 8.00
    # Fresh input of a cacheable request is written to the cache at 3.75, not 3.00.
    assert anthropic.cost(1_000_000, 0, 0) == 3.75
    assert anthropic.cost(1000, 0, 0) == 3.00 * 1000 / 1_000_000
    assert round(anthropic.cost(2_000_000, 1_000_000, 0), 6) == 3.75 + 0.30
    assert PRICE_TABLES["deepseek-like"] == PriceTable(0.27, 0.07, 1.10)


def test_cost_meter_adds_the_profile_prices_to_the_named_tables():
    meter = CostMeter(ModelProfile(price_input=1.0, price_cached_input=0.1, price_output=2.0))
    meter.add(2_000_000, 1_000_000, 500_000)
    totals = meter.rounded()
    assert set(totals) == {"openai-like", "anthropic-like", "deepseek-like", "profile"}
    assert totals["profile"] == 1.0 + 0.1 + 1.0
    assert totals["openai-like"] == 2.0 + 0.5 + 4.0


def strict() -> PromptCache:
    return PromptCache(COUNTER.message, COUNTER.tools, strict=True)


def test_strict_mode_keeps_only_tools_and_system_cached_when_tool_choice_changes():
    system, history = msg("system", 900, "s"), msg("user", 900, "h")
    head = COUNTER.tools(TOOLS) + COUNTER.message(system)
    for cache_of, expected in ((cache(), head + COUNTER.message(history)), (strict(), head)):
        c = cache_of
        c.cached_tokens([system, history, msg("user", 5, "a")], TOOLS, "auto")
        assert c.cached_tokens([system, history, msg("user", 5, "b")], TOOLS,
                               "none") == billable_cached(expected)
    # The same tool_choice again: the messages are cached in the strict mode too.
    c = strict()
    c.cached_tokens([system, history, msg("user", 5, "a")], TOOLS, "auto")
    assert c.cached_tokens([system, history, msg("user", 5, "b")], TOOLS, "auto") == \
        billable_cached(head + COUNTER.message(history))


def test_strict_mode_voids_everything_after_a_changed_tool_list_or_system_text():
    system, history = msg("system", 900, "s"), msg("user", 900, "h")
    c = strict()
    c.cached_tokens([system, history], TOOLS, "auto")
    other_tools = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "name": "fetch2"}}]
    assert c.cached_tokens([system, history, msg("user", 3)], other_tools, "auto") == 0
    c.cached_tokens([system, history], TOOLS, "auto")
    changed = msg("system", 900, "t")
    assert c.cached_tokens([changed, history, msg("user", 3)], TOOLS, "auto") == 0
    assert c.cached_tokens([system, history, msg("user", 3)], TOOLS, "auto") == billable_cached(
        COUNTER.tools(TOOLS) + COUNTER.message(system) + COUNTER.message(history))


# --- Anthropic-style breakpoint caching: only marked prefixes are written and read.

def marked_cache(strict_rule: bool = False) -> BreakpointCache:
    return BreakpointCache(COUNTER.message, COUNTER.tools, strict=strict_rule)


def test_an_unmarked_request_writes_and_reads_nothing():
    c = marked_cache()
    system, history = msg("system", 900, "s"), msg("user", 900, "h")
    assert c.usage([system, history], [], TOOLS) == (0, 0)
    # The same prefix marked later is written then, not read: nothing was written before.
    head = COUNTER.tools(TOOLS) + COUNTER.message(system) + COUNTER.message(history)
    assert c.usage([system, history, msg("user", 5)], [1], TOOLS) == (0, head)


def test_a_marked_prefix_is_written_once_and_read_by_a_later_mark_on_or_after_it():
    c = marked_cache()
    system, history = msg("system", 900, "s"), msg("user", 900, "h")
    head = COUNTER.tools(TOOLS) + COUNTER.message(system)
    # Marked at the system prompt: the tools and the system prompt are written, the rest
    # of the request is plain input.
    assert c.usage([system, history], [0], TOOLS) == (0, head)
    more = msg("user", 300, "m")
    grown = [system, history, more]
    # Marked at its end: the written head is read, the rest up to the mark written.
    assert c.usage(grown, [2], TOOLS) == (
        head, COUNTER.message(history) + COUNTER.message(more))
    assert c.usage(grown + [msg("user", 7, "n")], [2], TOOLS) == (
        head + COUNTER.message(history) + COUNTER.message(more), 0)


def test_a_prefix_under_the_minimum_is_neither_written_nor_read():
    c = marked_cache()
    small = msg("system", 100)
    assert c.usage([small, msg("user", 900, "one")], [0]) == (0, 0)
    assert c.usage([small, msg("user", 900, "two")], [0]) == (0, 0)


def test_a_mark_reads_back_at_most_twenty_blocks():
    c = marked_cache()
    system = msg("system", 1100, "s")
    c.usage([system], [0])
    turns = [msg("user", 3, f"t{i}") for i in range(LOOKBACK_BLOCKS)]
    near = [system] + turns[:LOOKBACK_BLOCKS - 1]
    assert c.usage(near, [len(near) - 1])[0] == COUNTER.message(system)
    far = [system] + turns
    assert marked_cache().usage(far, [len(far) - 1])[0] == 0
    c2 = marked_cache()
    c2.usage([system], [0])
    assert c2.usage(far, [len(far) - 1]) == (0, sum(COUNTER.message(m) for m in far))


def test_the_strict_rule_voids_the_marked_messages_when_tool_choice_changes():
    system, history = msg("system", 900, "s"), msg("user", 900, "h")
    head = COUNTER.tools(TOOLS) + COUNTER.message(system)
    whole = head + COUNTER.message(history)
    for strict_rule, read in ((False, whole), (True, head)):
        c = marked_cache(strict_rule)
        c.usage([system, history], [0, 1], TOOLS, tool_choice="auto")
        assert c.usage([system, history, msg("user", 4)], [0, 1], TOOLS,
                       tool_choice="none")[0] == read


def test_the_marks_are_read_off_content_parts_and_do_not_change_what_is_compared():
    plain = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
    sent = [plain[0], {"role": "user", "content": [
        {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}]
    messages, tools, marked, tools_marked = read_marks(sent, TOOLS)
    assert messages == plain and marked == [1] and tools == TOOLS and not tools_marked
    tool_marked = [{**TOOLS[0], "cache_control": {"type": "ephemeral"}}]
    _, tools, _, tools_marked = read_marks(plain, tool_marked)
    assert tools == TOOLS and tools_marked


def test_anthropic_tables_bill_reported_reads_and_writes_exactly():
    anthropic, openai = PRICE_TABLES["anthropic-like"], PRICE_TABLES["openai-like"]
    # Nothing marked: every token at the input price, not the write price.
    assert anthropic.cost(2000, 0, 0, (0, 0)) == 2000 * 3.00 / 1_000_000
    assert round(anthropic.cost(2000, 0, 0, (500, 1000)), 9) == round(
        (500 * 3.00 + 1000 * 3.75 + 500 * 0.30) / 1_000_000, 9)
    # Without the report: the dearest reading, every fresh token of a cacheable request
    # written; the automatic tables never read the report.
    assert anthropic.cost(2000, 0, 0) == 2000 * 3.75 / 1_000_000
    assert openai.cost(2000, 500, 0, (0, 2000)) == openai.cost(2000, 500, 0)
