"""Token estimates: what is counted, how it is memoized, how the server's count corrects it."""

from __future__ import annotations

import base64

from acp_server.context.tokens import (
    CHARS_PER_TOKEN,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    Estimator,
)
from acp_server.messages import ImagePart, Message, TextPart, ToolCall, ToolSpec, text_message


def test_text_counts_about_chars_per_token() -> None:
    est = Estimator()
    assert est.text("x" * 3500) == 1000
    assert est.message(text_message("user", "x" * 3500)) == (1000 + MESSAGE_OVERHEAD, 0)


def test_non_ascii_text_counts_by_bytes() -> None:
    est = Estimator()
    assert est.text("漢" * 350) == est.text("x" * 1050)


def test_an_image_counts_by_number_not_base64_size() -> None:
    est = Estimator()
    small = ImagePart(base64.b64encode(b"x" * 100).decode(), "image/png")
    large = ImagePart(base64.b64encode(b"x" * 1_000_000).decode(), "image/png")
    one = est.message(Message("user", (TextPart("look"), small)))
    same = est.message(Message("user", (TextPart("look"), large)))
    two = est.message(Message("user", (TextPart("look"), small, large)))
    assert one == same
    assert one[1] == IMAGE_TOKENS
    assert two[0] - one[0] == IMAGE_TOKENS
    assert two[1] == 2 * IMAGE_TOKENS


def test_tool_call_arguments_are_counted() -> None:
    est = Estimator()
    bare = Message("assistant", tool_calls=(ToolCall("c1", "write_file", {"path": "a"}),))
    content = {"path": "a", "content": "y" * 7000}
    big = Message("assistant", tool_calls=(ToolCall("c1", "write_file", content),))
    invalid = Message("assistant", tool_calls=(ToolCall("c1", "write_file", {}, "z" * 3500),))
    assert est.message(big)[0] - est.message(bare)[0] >= 7000 / CHARS_PER_TOKEN
    assert est.message(invalid)[0] >= 1000


def test_non_ascii_arguments_count_as_sent_escaped() -> None:
    """The OpenAI wire sends arguments with non-ASCII escaped: "\u00e9" is six characters."""
    est = Estimator()
    call = ToolCall("c1", "write_file", {"path": "a", "content": "é" * 700})
    assert est.message(Message("assistant", tool_calls=(call,)))[0] >= 700 * 6 / CHARS_PER_TOKEN


def test_tool_specs_are_counted_with_their_schemas() -> None:
    est = Estimator()
    plain = ToolSpec("grep", "Search.", {"type": "object"})
    described = ToolSpec(
        "grep", "Search.", {"type": "object", "properties": {"p": {"description": "d" * 3500}}}
    )
    assert est.tools([plain]) > 0
    assert est.tools([described]) - est.tools([plain]) >= 1000
    assert est.tools([plain, described]) == est.tools([plain]) + est.tools([described])


def test_estimates_are_memoized_per_message_instance() -> None:
    calls = 0

    class Counting(Estimator):
        def _count(self, message: Message) -> tuple[int, int]:
            nonlocal calls
            calls += 1
            return super()._count(message)

    est = Counting()
    message = text_message("user", "hello")
    twin = text_message("user", "hello")  # equal, but another object
    est.message(message)
    est.message(message)
    assert calls == 1
    est.message(twin)
    assert calls == 2


def test_a_reused_id_never_returns_a_dead_messages_estimate() -> None:
    est = Estimator()
    for n in range(200):  # ids of freed objects get reused; each must be counted afresh
        message = text_message("user", "x" * (35 * n))
        assert est.message(message)[0] == MESSAGE_OVERHEAD + n * 10
        del message  # freed at once (reference counting); its id is free for the next one
    assert len(est._cache) <= 1  # entries go with their messages


def test_one_report_above_the_estimate_is_overhead_below_it_lowers_the_factor() -> None:
    est = Estimator()
    est.observe(1000, 1500)
    assert (est.factor, est.overhead) == (1.0, 500)  # a template around the fixed part
    assert est.corrected(1000) + est.overhead == 1500
    est.observe(1000, 900)
    assert abs(est.factor - 0.95) < 1e-9 and est.overhead == 0
    est.observe(50, 5000)  # too small a sample to say anything
    est.observe(1000, 0)  # nothing reported
    assert abs(est.factor - 0.95) < 1e-9 and est.overhead == 0


def test_reports_at_different_sizes_fit_the_factor_and_the_overhead() -> None:
    est = Estimator()
    for raw in (1000, 1400, 1800, 2600):
        est.observe(raw, int(1.3 * raw) + 400)
    assert abs(est.factor - 1.3) < 0.01
    assert abs(est.overhead - 400) <= 5
    est.forget_fixed()  # another tool set: its overhead is unknown again, the factor stays
    assert est.overhead == 0 and abs(est.factor - 1.3) < 0.01


def test_the_newest_report_is_never_underestimated() -> None:
    est = Estimator()
    for raw, reported in ((1000, 1000), (2000, 2000), (3000, 4500)):
        est.observe(raw, reported)
    assert est.corrected(3000) + est.overhead >= 4500


def test_the_factor_is_clamped() -> None:
    est = Estimator()
    est.observe(1000, 10_000)
    est.observe(2000, 300_000)
    assert est.factor == 4.0
    for raw in range(1000, 5000, 400):
        est.observe(raw, 1)
    assert est.factor == 0.8  # a count that low is a server that dropped part of the prompt
    assert est.overhead == 0


def test_a_narrow_spread_of_noisy_reports_never_fits_a_slope_steeper_than_any_report() -> None:
    """Requests of 4,200-4,400 raw tokens whose contents tokenize a little differently (as
    after pruning): the line through them is steep, but no report is even 1.2 x its estimate."""
    est = Estimator()
    reports = [(4310, 5005), (4248, 4984), (4278, 5029), (4392, 5203), (4422, 5249), (4191, 4802)]
    for raw, reported in reports:
        est.observe(raw, reported)
    assert est.factor <= min(reported / raw for raw, reported in reports)
    assert est.corrected(4191) + est.overhead <= 4802 * 1.1  # the last request, about right


def test_chars_for_inverts_the_corrected_estimate() -> None:
    est = Estimator()
    est.observe(1000, 2000)
    chars = est.chars_for(500)
    assert est.corrected(est.text("x" * chars)) <= 501
