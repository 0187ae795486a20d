"""The pre-flight fit: statuses, the person-facing problem, the incremental meter, learning."""

from __future__ import annotations

from acp_server.context.fit import ContextBudget, Fit
from acp_server.context.tokens import Estimator
from acp_server.context.window import Window
from acp_server.messages import ContextOverflow, Message, ToolCall, ToolSpec, text_message

TOOLS = (ToolSpec("read_file", "Read a file.", {"type": "object"}),)


def turn(n: int, output_chars: int = 700) -> list[Message]:
    call = ToolCall(f"c{n}", "read_file", {"path": f"f{n}.py"})
    return [
        text_message("user", f"request {n}"),
        Message("assistant", tool_calls=(call,)),
        text_message("tool", "x" * output_chars, tool_call_id=f"c{n}"),
        text_message("assistant", f"answer {n}"),
    ]


def history(turns: int, output_chars: int = 700) -> list[Message]:
    return [m for n in range(turns) for m in turn(n, output_chars)]


def reference_tokens(est: Estimator, messages: list[Message]) -> int:
    return est.corrected(sum(est._count(m)[0] for m in messages))


def test_a_small_request_fits() -> None:
    budget = ContextBudget(Window(configured=8192))
    fit = budget.fit("system", TOOLS, history(2))
    assert fit.status == "fits"
    assert fit.budget == 6144
    assert fit.threshold == int(6144 * 0.85)
    assert fit.used == fit.system + fit.tools + fit.history
    assert fit.problem() is None


def test_above_the_threshold_asks_for_compaction() -> None:
    budget = ContextBudget(Window(configured=8192))
    fit = budget.fit("system", TOOLS, history(40))
    assert fit.used > fit.threshold
    assert fit.status == "compact"


def test_fixed_parts_alone_too_large_is_an_error_naming_the_part() -> None:
    budget = ContextBudget(Window(configured=4096))
    hist = [*history(2), text_message("user", "paste " * 4000)]
    fit = budget.fit("system", TOOLS, hist)
    assert fit.status == "too_large"
    problem = fit.problem()
    assert problem is not None
    assert f"The largest part is your message (~{fit.prompt:,} tokens" in problem
    assert f"about {fit.fixed - fit.budget:,} too many" in problem
    assert "window of 4,096 tokens" in problem
    assert "conversation is unchanged" in problem and "Shorten the message" in problem


def test_a_huge_system_prompt_is_named() -> None:
    budget = ContextBudget(Window(configured=4096))
    fit = budget.fit("rules " * 3000, TOOLS, [text_message("user", "hi")])
    assert fit.status == "too_large"
    assert "The largest part is the system prompt" in (fit.problem() or "")
    assert "larger context window" in (fit.problem() or "")


def test_the_prompt_is_the_latest_user_message() -> None:
    budget = ContextBudget()
    hist = [*history(3), text_message("user", "y" * 3500)]
    fit = budget.fit("", (), hist)
    assert fit.prompt == budget.estimator.message(hist[-1])[0]
    hist += turn(9)[1:]  # a tool round of the same turn: the prompt stays the same message
    fit = budget.fit("", (), hist)
    assert fit.prompt == budget.estimator.message(hist[-4])[0]


def test_incremental_fit_matches_a_fresh_count() -> None:
    budget = ContextBudget()
    hist = history(10)
    for n in range(10, 20):
        for message in turn(n):
            hist.append(message)
            fit = budget.fit("system", TOOLS, hist)
            assert fit.history == reference_tokens(budget.estimator, hist)


def test_a_rebuilt_history_is_recounted() -> None:
    budget = ContextBudget()
    hist = history(10)
    budget.fit("", (), hist)
    shorter = hist[8:]
    assert budget.fit("", (), shorter).history == reference_tokens(budget.estimator, shorter)
    replaced = [*hist[:5], text_message("tool", "short", tool_call_id="c1"), *hist[6:]]
    assert budget.fit("", (), replaced).history == reference_tokens(budget.estimator, replaced)
    assert budget.fit("", (), tuple(hist)).history == reference_tokens(budget.estimator, hist)


def test_system_and_tools_are_recounted_when_they_change() -> None:
    budget = ContextBudget()
    hist = history(1)
    first = budget.fit("short", TOOLS, hist)
    longer = budget.fit("much longer system prompt " * 20, TOOLS, hist)
    assert longer.system > first.system
    more = (*TOOLS, ToolSpec("grep", "Search " * 100, {"type": "object"}))
    assert budget.fit("short", more, hist).tools > first.tools
    assert budget.fit("short", TOOLS, hist).tools == first.tools


def test_after_round_learns_the_correction() -> None:
    budget = ContextBudget()
    hist = history(10)
    fit = budget.fit("system", TOOLS, hist)
    assert budget.after_round(fit, int(fit.raw_text * 1.3)) is None
    longer = [*hist, *history(14)[40:]]
    fit = budget.fit("system", TOOLS, longer)
    assert budget.after_round(fit, int(fit.raw_text * 1.3)) is None
    assert abs(budget.estimator.factor - 1.3) < 0.01
    again = budget.fit("system", TOOLS, longer)
    assert again.history > fit.history


def test_a_constant_template_overhead_never_makes_a_prompt_that_fits_look_too_large() -> None:
    """llama-cpp-python's tool template adds ~1,500 tokens we do not count. Learned as one
    factor, the first report (a short prompt) made everything ~3.4x; a larger prompt then looked
    "too large" though the server would take it (the turn failed, nothing was sent)."""

    def server_count(fit: Fit) -> int:  # what the server reports: prose ~0.9, plus the template
        return int(0.9 * fit.raw_text) + 1500

    budget = ContextBudget(Window(configured=8192))
    system = "You are a careful assistant. " * 60
    paste = "The log says: " + "an ordinary English sentence. " * 180
    hist = [text_message("user", "Hello there, a short note. " * 8)]
    for n in range(12):  # growing English history, with a large pasted message now and then
        fit = budget.fit(system, TOOLS, hist)
        if fit.status == "compact":  # as a compaction would: the older messages go
            hist = hist[-1:]
            fit = budget.fit(system, TOOLS, hist)
        assert server_count(fit) < fit.budget  # it fits the real window ...
        assert fit.status != "too_large", fit.problem()  # ... so it is not judged too large
        if n > 2:  # after a few reports, no dangerous underestimate either
            assert fit.used >= server_count(fit) * 0.95
        budget.after_round(fit, server_count(fit))
        text = paste if n % 4 == 0 else f"note {n} " * 90
        hist += [text_message("assistant", "Noted. " * 10), text_message("user", text)]


def test_after_round_guards_against_silent_truncation() -> None:
    budget = ContextBudget(Window(configured=32768))
    hist = history(60)
    fit = budget.fit("system", TOOLS, hist)
    assert fit.used > 13000
    assert budget.after_round(fit, 6144) is None  # once: a suspicion, not yet believed
    assert budget.window.size == 32768
    assert budget.after_round(budget.fit("system", TOOLS, hist), 6144) == 6144  # it repeats
    assert budget.window.size == 6144
    assert budget.estimator.factor == 1.0  # a truncated count teaches nothing about tokens
    assert budget.fit("system", TOOLS, hist).status == "compact"


def test_images_do_not_trigger_the_guard() -> None:
    """Servers count images far below our flat 1,000; only text is compared."""
    from acp_server.messages import ImagePart, TextPart

    budget = ContextBudget(Window(configured=32768))
    image = ImagePart("aGVsbG8=", "image/png")
    hist = [Message("user", (TextPart("what is in these? " * 50), *[image] * 8))]
    fit = budget.fit("system", TOOLS, hist)
    assert budget.after_round(fit, fit.raw_text + 8 * 85) is None
    assert budget.window.size == 32768


def test_an_overflow_error_teaches_the_window_and_the_correction() -> None:
    budget = ContextBudget(Window(configured=32768))
    hist = history(40)
    fit = budget.fit("system", TOOLS, hist)
    budget.after_overflow(ContextOverflow(8192, int(fit.raw_text * 1.25)), fit)
    assert budget.window.size == 8192
    assert budget.fit("system", TOOLS, history(40)).used >= int(fit.raw_text * 1.25)


def test_an_overflow_without_numbers_lowers_below_what_was_sent() -> None:
    budget = ContextBudget(Window(configured=32768))
    fit = budget.fit("system", TOOLS, history(40))
    budget.after_overflow(ContextOverflow(), fit)
    assert budget.window.size < fit.used


def test_an_overflow_with_only_the_prompt_count_lowers_below_it() -> None:
    budget = ContextBudget(Window(configured=32768))
    budget.after_overflow(ContextOverflow(prompt_tokens=10_000))
    assert budget.window.size == 8000


def test_fit_is_a_value() -> None:
    fit = Fit(8192, 6144, 5222, 5222, 100, 200, 50, 1000, 1300)
    assert (fit.used, fit.fixed, fit.room) == (1300, 350, 4844)


def test_capped_reports_do_not_hide_a_silent_truncation() -> None:
    """A server that keeps 6,144 tokens reports 6,144 for every longer prompt: those reports
    must not teach the estimate down so far that the guard misses the cut."""
    budget = ContextBudget(Window(configured=32768))
    hist: list[Message] = []
    for n in range(200):
        hist += turn(n, 3000)
        fit = budget.fit("system", TOOLS, hist)
        true_count = int(fit.raw_text * 1.1)
        if budget.after_round(fit, min(true_count, 6144)) is not None:
            break
    assert true_count < 10_000  # caught early: the server had dropped about a third
    assert budget.window.size == 6144
    assert budget.estimator.factor >= 1.0


def test_a_cache_hit_is_not_read_as_a_cut() -> None:
    """A server that says part of the prompt came from its cache may count only the rest."""
    budget = ContextBudget(Window(configured=32768))
    hist = history(60)
    for _ in range(3):
        fit = budget.fit("system", TOOLS, hist)
        assert budget.after_round(fit, 2000, cached=12000) is None
    assert budget.window.size == 32768


def test_a_count_of_only_what_is_new_is_a_prompt_cache_not_a_cut() -> None:
    """Ollama counts `prompt_eval_count` net of its cache: about the size of what was added."""
    budget = ContextBudget(Window(configured=32768))
    hist = history(60)
    budget.after_round(budget.fit("system", TOOLS, hist), 15000)
    for n in range(4):
        hist += turn(100 + n, 3000)
        fit = budget.fit("system", TOOLS, hist)
        assert budget.after_round(fit, 1100) is None
    assert budget.window.size == 32768


def test_a_window_learned_from_low_counts_never_refuses_a_request() -> None:
    budget = ContextBudget(Window(configured=32768))
    budget.window.lower(700, "truncation")
    fit = budget.fit("rules " * 1000, TOOLS, [text_message("user", "hi")])
    assert fit.status != "too_large"
    assert fit.window == 32768


def test_a_refusal_says_where_the_window_came_from() -> None:
    budget = ContextBudget(Window(discovered=4096))
    problem = budget.fit("rules " * 3000, TOOLS, [text_message("user", "hi")]).problem() or ""
    assert "4,096 tokens (as the model server reports it)" in problem
    assert "Start the model server with a larger context" in problem


def test_an_overshooting_factor_does_not_make_honest_counts_look_cut() -> None:
    """A slope fitted through a few reports can overshoot (1.9 was seen after a compaction):
    the guard then must not read every honest count as a cut."""
    budget = ContextBudget(Window(configured=16384))
    hist = history(12)
    for _ in range(3):
        fit = budget.fit("system", TOOLS, hist)
        budget.estimator.factor = 1.95
        assert budget.after_round(fit, int(fit.raw_text * 1.15)) is None
    assert budget.window.size == 16384


def test_after_a_compaction_that_freed_too_little_the_threshold_waits_for_growth() -> None:
    budget = ContextBudget(Window(configured=8192))
    hist = history(23)
    plain = budget.fit("system", TOOLS, hist)
    assert plain.threshold < plain.used <= plain.budget
    budget.floor = plain.used  # a compaction could not get below this
    raised = budget.fit("system", TOOLS, hist)
    regrow = (raised.budget - raised.system - raised.tools) // 10
    assert raised.threshold == max(plain.threshold, plain.used + regrow)
    assert raised.trigger == plain.threshold  # what compaction aims under is unchanged
    budget.floor = raised.budget
    assert budget.fit("system", TOOLS, hist).threshold == raised.budget  # never past the budget


def test_the_raised_threshold_is_forgotten_once_the_conversation_is_small_again() -> None:
    budget = ContextBudget(Window(configured=8192))
    budget.floor = budget.fit("system", TOOLS, history(12)).used
    assert budget.fit("system", TOOLS, history(1)).threshold == int(6144 * 0.85)  # /clear
    assert budget.floor == 0


def test_only_a_longer_prompt_count_raises_a_window_learned_from_a_cut() -> None:
    """A server caught keeping 6,144 tokens: a reply's tokens on top of a prompt that fits are
    no evidence that it holds more (they raised the window before, and the next requests were
    cut again); its own count of a longer prompt is, and raises it that far, no further."""
    budget = ContextBudget(Window(configured=32768))
    budget.window.lower(6144, "truncation")

    def history(words: int) -> list[Message]:
        said = [text_message("user", "word " * words), text_message("assistant", "Read.")]
        return [*said, text_message("user", "go on")]

    words = 100
    while budget.fit("You help.", (), history(words)).used < 5900:
        words += 100
    fit = budget.fit("You help.", (), history(words))
    assert fit.used <= 6144 and budget.window.size == 6144
    assert budget.after_round(fit, fit.used, reply=400) is None
    assert budget.window.size == 6144  # 400 reply tokens beyond it: not a longer prompt
    assert budget.after_round(fit, 6400) is None
    assert budget.window.size == 6400  # the server said it read 6,400 prompt tokens
