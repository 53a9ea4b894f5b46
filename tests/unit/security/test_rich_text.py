"""Rich text from provider descriptors: dangerous HTML removed, data strings untouched, and a text whose
escaping would overflow its field given as plain text within the limit."""

from __future__ import annotations

import pytest

from wepush.server.api._rich_text import clean_rich_text, clean_schema_texts


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ('plain words, "quoted" and it\'s fine', 'plain words, "quoted" and it\'s fine'),
        ("<b>bold</b> <code>x</code>", "<b>bold</b> <code>x</code>"),
        ("<script>alert(1)</script>kept", "kept"),
        ('<img src="x" onerror="alert(1)">', ""),
        ('<a href="javascript:alert(1)">x</a>', '<a rel="noopener noreferrer">x</a>'),
        ('<p style="color:red" onclick="x()">p</p>', "<p>p</p>"),
        ("a < b & c", "a &lt; b &amp; c"),
    ],
)
def test_dangerous_html_is_removed_and_safe_formatting_kept(raw: str, cleaned: str) -> None:
    assert clean_rich_text(raw) == cleaned


def test_a_text_whose_escaping_would_overflow_its_field_stays_within_it() -> None:
    within = clean_rich_text("<i>x</i>" + "&" * 10, max_chars=60)
    as_plain = clean_rich_text("<i>" + "&" * 12 + "</i>", max_chars=60)
    cut = clean_rich_text("&" * 40, max_chars=22)

    assert within == "<i>x</i>" + "&amp;" * 10
    assert as_plain == "&amp;" * 12
    # 21 characters hold four whole entities; the fifth would be cut inside and is left out.
    assert cut == "&amp;" * 4 + "…"
    assert len(cut) <= 22


def test_only_text_keywords_are_cleaned_in_a_schema() -> None:
    schema = {
        "title": "<script>x</script>Form",
        "properties": {
            "title": {"type": "string", "description": "<u>shown</u>", "default": "<raw>"},
            "pick": {"enum": ["<a>"], "pattern": "^<.*>$", "examples": ["<b>"]},
        },
        "allOf": [{"description": "<i>ok</i><img src=x>"}],
    }

    assert clean_schema_texts(schema) == {
        "title": "Form",
        "properties": {
            "title": {"type": "string", "description": "shown", "default": "<raw>"},
            "pick": {"enum": ["<a>"], "pattern": "^<.*>$", "examples": ["<b>"]},
        },
        "allOf": [{"description": "<i>ok</i>"}],
    }
