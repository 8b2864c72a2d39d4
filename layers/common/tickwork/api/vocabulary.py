"""API fields whose values are words of one of Tickwork's vocabularies (tickwork.vocab).

`Annotated[RunStatus, OneOf()]` is validated and documented as the Literal of the enum's words (all of them, or
those named): the OpenAPI document shows `{"enum": [...], "type": "string"}` inline and a wrong value gets the
Literal's message ("Input should be 'allow', 'skip' or 'queue_one'"), while code reads the enum member.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema


class OneOf:
    """One of `words` (none given: every word of the annotated enum)."""

    def __init__(self, *words: StrEnum) -> None:
        self.words = words

    def __get_pydantic_core_schema__(self, source: type[StrEnum], handler: GetCoreSchemaHandler) -> CoreSchema:
        words: Any = tuple(word.value for word in self.words or tuple(source))
        return core_schema.no_info_after_validator_function(source, handler(Literal[words]))
