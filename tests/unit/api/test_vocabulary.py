"""A vocabulary field of the API reads as the enum's member, and is validated and documented as the Literal of its
words: the OpenAPI document and the 400s say what they said when the words were spelled in the models."""
from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, ValidationError

from tickwork.api.vocabulary import OneOf
from tickwork.vocab import Overlap, RunStatus


class Words(BaseModel):
    overlap: Annotated[Overlap, OneOf()]
    replayed: Annotated[RunStatus, OneOf(RunStatus.FAILED, RunStatus.LOST)] | None = None


class Spelled(BaseModel):
    overlap: Literal["allow", "skip", "queue_one"]
    replayed: Literal["failed", "lost"] | None = None


def test_a_word_is_read_as_its_member() -> None:
    words = Words.model_validate({"overlap": "queue_one", "replayed": "lost"})
    assert words.overlap is Overlap.QUEUE_ONE and words.replayed is RunStatus.LOST
    assert words.model_dump_json() == '{"overlap":"queue_one","replayed":"lost"}'


def test_the_schema_is_the_literal_of_the_words() -> None:
    assert Words.model_json_schema()["properties"] == Spelled.model_json_schema()["properties"]


@pytest.mark.parametrize("given", [{"overlap": "never"}, {"overlap": "allow", "replayed": "succeeded"}])
def test_a_wrong_word_is_refused_as_the_literal_refuses_it(given: dict[str, str]) -> None:
    with pytest.raises(ValidationError) as words:
        Words.model_validate(given)
    with pytest.raises(ValidationError) as spelled:
        Spelled.model_validate(given)
    assert [(e["loc"], e["msg"]) for e in words.value.errors()] == [(e["loc"], e["msg"]) for e in spelled.value.errors()]
