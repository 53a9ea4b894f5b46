"""Import settings are checked before any file is read; each problem names its request field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from wepush.server.application._deps import ImportLimits
from wepush.server.application._import_settings import ImportSettings
from wepush.server.application.errors import ValidationFailed
from wepush.server.domain import ImportFormat

LIMITS = ImportLimits(max_bytes=1 << 30, max_rows=1000, max_columns=3, max_field_length=100)


def problems(**settings: Any) -> set[tuple[str, str]]:
    options: dict[str, Any] = {"format": ImportFormat.CSV, "field_mapping": {"Mobile": "mobile"}}
    options.update(settings)
    return {(issue.field, issue.code) for issue in ImportSettings(**options).issues(LIMITS)}


@pytest.mark.parametrize("name", ["mobile", "_id", "first-name", "Name_2", "x" * 128])
def test_recipient_fields_may_have_any_name_a_template_can_use(name: str) -> None:
    # Any source column name, but the field must be reachable as {{name}} in a message template.
    assert problems(field_mapping={"手机 号码": name}) == set()


def test_consistent_settings_have_no_problems_and_round_trip_through_options() -> None:
    settings = ImportSettings(
        format=ImportFormat.CSV,
        field_mapping={"Mobile": "mobile", "Name": "name"},
        delimiter=";",
        encoding="utf-8-sig",
        item_id_field="mobile",
    )
    assert settings.issues(LIMITS) == []
    assert ImportSettings.from_options(ImportFormat.CSV, settings.to_options()) == settings
    exact = replace(settings, trim_whitespace=False)
    assert ImportSettings.from_options(ImportFormat.CSV, exact.to_options()) == exact


def test_an_import_stored_before_trimming_existed_reads_back_untrimmed() -> None:
    options = ImportSettings(format=ImportFormat.CSV, field_mapping={"m": "mobile"}).to_options()
    del options["trimWhitespace"]
    assert ImportSettings.from_options(ImportFormat.CSV, options).trim_whitespace is False


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"item_id_field": "email"}, ("/itemIdField", "UNKNOWN_FIELD")),
        ({"dedupe_keys": ("email",)}, ("/dedupeKeys/0", "UNKNOWN_FIELD")),
        ({"field_mapping": {"A": "x", "B": "x"}}, ("/fieldMapping/B", "DUPLICATE_FIELD")),
        ({"has_header": False}, ("/fieldMapping/Mobile", "NOT_A_POSITION")),
        ({"delimiter": '"'}, ("/delimiter", "INVALID_DELIMITER")),
        ({"delimiter": "\n"}, ("/delimiter", "INVALID_DELIMITER")),
        ({"encoding": "latin-1"}, ("/encoding", "NOT_ALLOWED")),
        ({"field_mapping": {"手机": "手机"}}, ("/fieldMapping/手机", "INVALID_FIELD_NAME")),
        ({"field_mapping": {"Mobile": "first name"}}, ("/fieldMapping/Mobile", "INVALID_FIELD_NAME")),
        ({"field_mapping": {"Mobile": "1st"}}, ("/fieldMapping/Mobile", "INVALID_FIELD_NAME")),
        ({"field_mapping": {"Mobile": "x" * 129}}, ("/fieldMapping/Mobile", "INVALID_FIELD_NAME")),
        ({"field_mapping": {"a": "a", "b": "b", "c": "c", "d": "d"}}, ("/fieldMapping", "TOO_MANY_FIELDS")),
        (
            {"format": ImportFormat.TXT, "field_mapping": {"a": "a", "b": "b"}},
            ("/fieldMapping", "TXT_SINGLE_COLUMN"),
        ),
        (
            {
                "field_mapping": {"Mobile": "mobile", "Name": "name"},
                "item_id_field": "mobile",
                "dedupe_keys": ("name",),
            },
            ("/dedupeKeys", "CONFLICTS_WITH_ITEM_ID"),
        ),
    ],
)
def test_each_inconsistency_is_reported_on_its_field(
    settings: dict[str, Any], expected: tuple[str, str]
) -> None:
    assert expected in problems(**settings)


@pytest.mark.parametrize("delimiter", ['"', "\n", "\r", ",,", "", "1", "a", "中"])
def test_a_delimiter_that_cannot_separate_fields_is_refused_saying_what_it_may_be(delimiter: str) -> None:
    settings = ImportSettings(
        format=ImportFormat.CSV, field_mapping={"Mobile": "mobile"}, delimiter=delimiter
    )
    [issue] = settings.issues(LIMITS)
    assert (issue.field, issue.message) == (
        "/delimiter",
        "must be one character, not a quote, a line break, a letter or a digit",
    )


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|", " ", "、"])
def test_usual_delimiters_are_accepted(delimiter: str) -> None:
    settings = ImportSettings(
        format=ImportFormat.CSV, field_mapping={"Mobile": "mobile"}, delimiter=delimiter
    )
    assert settings.issues(LIMITS) == []


def test_validate_raises_validation_failed_with_every_issue() -> None:
    with pytest.raises(ValidationFailed) as raised:
        ImportSettings(
            format=ImportFormat.CSV, field_mapping={"Mobile": "mobile"}, item_id_field="x", dedupe_keys=("y",)
        ).validate(LIMITS)
    assert {issue.field for issue in raised.value.issues} == {"/itemIdField", "/dedupeKeys/0", "/dedupeKeys"}


def test_a_txt_import_is_identified_by_its_one_field_unless_told_otherwise() -> None:
    txt: dict[str, Any] = {"format": ImportFormat.TXT, "field_mapping": {"1": "mobile"}, "has_header": False}
    assert ImportSettings(**txt).key_fields == ("mobile",)
    assert ImportSettings(**txt, item_id_field="mobile").key_fields == ("mobile",)
    # A CSV row without an identity stays its own recipient: two people may share every mapped value.
    assert ImportSettings(format=ImportFormat.CSV, field_mapping={"Mobile": "mobile"}).key_fields == ()
    assert ImportSettings(
        format=ImportFormat.CSV, field_mapping={"Mobile": "mobile"}, dedupe_keys=("mobile",)
    ).key_fields == ("mobile",)
