"""A charset an upload declares either agrees with its import's encoding or refuses the upload."""

from __future__ import annotations

import pytest

from wepush.server.application._import_charset import CharsetMismatch, check_declared_charset


@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [
        (None, "utf-8"),
        ("text/csv", "gb18030"),
        ("text/csv; charset=", "utf-16"),
        ("text/csv; charset=UTF8", "utf-8"),
        ("text/csv; charset=utf-8", "utf-8-sig"),
        ("text/plain; charset=us-ascii", "gb18030"),
        ("text/csv; charset=cp936", "gb18030"),
        ("text/csv; charset=GB2312", "gb18030"),
        ("text/tab-separated-values; charset=utf-16le", "utf-16"),
    ],
)
def test_no_charset_or_one_the_encoding_reads_is_accepted(content_type: str | None, encoding: str) -> None:
    check_declared_charset(content_type, encoding)


@pytest.mark.parametrize(
    ("content_type", "encoding", "advice"),
    [
        ("text/csv; charset=utf-8", "gb18030", "start a new import with encoding utf-8"),
        ("text/csv; charset=gbk", "utf-8", "start a new import with encoding gb18030"),
        ("text/csv; charset=utf-16", "utf-8", "start a new import with encoding utf-16"),
        ("text/csv; charset=us-ascii", "utf-16", "imports read utf-8, gb18030"),
        ("text/csv; charset=windows-1252", "utf-8", "imports read utf-8, gb18030"),
    ],
)
def test_a_charset_the_encoding_does_not_read_is_refused_with_advice(
    content_type: str, encoding: str, advice: str
) -> None:
    with pytest.raises(CharsetMismatch) as refused:
        check_declared_charset(content_type, encoding)

    assert refused.value.status == 415
    assert advice in str(refused.value)
    assert [issue.field for issue in refused.value.issues] == ["Content-Type"]


def test_an_unknown_charset_is_refused_and_shown_cut_short() -> None:
    with pytest.raises(CharsetMismatch, match="which is no text encoding the Service knows") as refused:
        check_declared_charset("text/csv; charset=" + "x" * 500, "utf-8")

    assert "x" * 40 not in str(refused.value)
