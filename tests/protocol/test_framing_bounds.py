"""Framing under a hostile or careless peer (protocol/framing.py, no I/O): lines and
SSE events are bounded, SSE lines end in CR, LF or CRLF (the HTML standard's event
stream), and a caller that stops reading early never sees a line twice."""

from __future__ import annotations

import pytest

from modelctx.protocol.framing import (
    EventTooLarge,
    LineBuffer,
    LineTooLong,
    SSEParser,
    request_id,
    response_id,
)

DEPTH = 100_000


class TestLineBuffer:
    def test_a_caller_that_reads_one_line_and_stops_never_sees_it_again(self):
        buf = LineBuffer()
        first = next(iter(buf.feed(b"a\nb\n")))

        assert first == b"a"
        assert list(buf.feed(b"c\n")) == [b"c"]

    def test_a_line_over_the_limit_is_dropped_up_to_its_newline_and_the_next_line_is_read(self):
        buf = LineBuffer(max_line=8)

        with pytest.raises(LineTooLong) as raised:
            buf.feed(b"ok\n" + b'{"id":7,' + b"x" * 20)
        assert raised.value.lines == [b"ok"]  # what came before it is still handed over
        assert raised.value.head.startswith(b'{"id":7,')
        assert buf.feed(b"x" * 1000) == []  # the rest of the long line: not held
        assert buf.feed(b"xx\nnext\n") == [b"next"]
        assert buf.tail() == b""


class TestSSE:
    @pytest.mark.parametrize("newline", [b"\r", b"\n", b"\r\n"], ids=["CR", "LF", "CRLF"])
    def test_lines_may_end_in_cr_lf_or_crlf_even_split_across_chunks(self, newline):
        stream = b": ping" + newline + newline + b"id: 4" + newline + b"data: {}" + newline + newline
        parser = SSEParser()

        events = [event for i in range(len(stream)) for event in parser.feed(stream[i : i + 1])]

        assert events == [("message", b"{}")]
        assert parser.last_id == "4"

    def test_a_crlf_split_between_chunks_is_one_line_end_not_two(self):
        parser = SSEParser()

        assert parser.feed(b"data: a\r") == []
        assert parser.feed(b"\ndata: b\r") == []  # a blank line here would end the event early
        assert parser.feed(b"\n\r\n") == [("message", b"a\nb")]

    def test_an_event_of_endless_data_lines_raises_at_the_bound_and_holds_nothing(self):
        parser = SSEParser(max_event=1000)
        fed = 0
        with pytest.raises(EventTooLarge, match="exceeded 1000 bytes"):
            while fed < 10_000_000:
                parser.feed(b"data: " + b"x" * 100 + b"\n")
                fed += 107
        assert fed <= 1000

    def test_a_partial_line_past_the_bound_raises_too(self):
        parser = SSEParser(max_event=1000)

        with pytest.raises(EventTooLarge):
            parser.feed(b"data: " + b"x" * 2000)

    def test_events_before_the_one_too_large_are_handed_over_with_the_error(self):
        parser = SSEParser(max_event=100)

        with pytest.raises(EventTooLarge) as raised:
            parser.feed(b"data: first\n\ndata: " + b"x" * 200 + b"\n")
        assert raised.value.events == [("message", b"first")]


class TestResponseId:
    def test_the_id_of_a_response_nested_too_deeply_to_decode(self):
        frame = b'{"jsonrpc":"2.0","id":5,"result":' + b"[" * DEPTH + b"]" * DEPTH + b"}"

        assert response_id(frame) == 5

    def test_a_string_id_after_the_result(self):
        assert response_id(b'{"result":{"a":[[["id"]]]}, "id" : "r-1"}') == "r-1"

    def test_the_head_of_an_error_response_cut_short(self):
        assert response_id(b'{"jsonrpc":"2.0","id":9,"error":{"code":-1,"data":[[[[') == 9

    @pytest.mark.parametrize(
        "frame",
        [
            b'{"jsonrpc":"2.0","id":3,"method":"x","params":' + b"[" * DEPTH,  # a request of the peer
            b'{"id":3,"params":{"result":1}}',  # "result" is not at the top level
            b"[" * DEPTH,
            b'{"jsonrpc":"2.0","result":{},"id":[1]}',
            b"not json",
        ],
    )
    def test_no_id_unless_the_frame_is_a_response_with_a_readable_id(self, frame):
        assert response_id(frame) is None


class TestRequestId:
    @pytest.mark.parametrize(
        ("head", "expected"),
        [
            (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"a":"', 7),
            (b'{"method":"tools/call","id":"r-1","params":{"id":5,"x":"', "r-1"),  # the nested id is not it
            (b'{"params":{"id":5,"pad":"', None),  # no top-level id or method in the head
            (b'{"jsonrpc":"2.0","id":7,"result":{"a":"', None),  # a response is never answered
            (b'{"jsonrpc":"2.0","id":7,"pad":"', None),  # no method: not known to be a request
            (b'[{"id":1,"method":"x"}', None),  # a batch
        ],
    )
    def test_the_id_of_a_request_too_long_to_decode_is_read_from_its_top_level_only(self, head, expected):
        assert request_id(head) == expected
