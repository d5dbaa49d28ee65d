"""Request bodies as typed models: one msgspec ``Struct`` per body gives its validation
here and its JSON Schema in /openapi.json (node/http/openapi/schemas.py).

:func:`decode` turns msgspec's ``ValidationError`` into the API's refusal (an
``InvalidFieldError``, answered by ``answered_over_http``): ``unknown_field`` for a field
the model lacks, ``out_of_range`` for a number outside its bounds, ``invalid_field`` for
anything else, each naming the field as ``push.url`` (a list's item or a map's entry is
its list's or map's field). What a type cannot say (which fields go together, a URL that
parses) is checked by hand after decoding.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import Meta

from horologe.storage import InvalidFieldError
from horologe.storage.message import MessageLimits
from horologe.storage.message_id import ID_PATTERN
from horologe.storage.message_json import (
    BASE64_PATTERN,
    DURATION_PATTERN,
    MAX_HEADER_NAME,
    MAX_HEADER_VALUE,
    MAX_KEY,
    MAX_TAGS,
    NAME_PATTERN,
    RESERVED_HEADER_PREFIX,
    TAG_PATTERN,
    json_object,
    refusal,
)

T = TypeVar("T", bound=msgspec.Struct)
OUT_OF_RANGE = re.compile(r"Expected `(?:int|float)` [<>]=? |Integer value out of range")
UNMATCHED = re.compile(r"Expected `str` matching regex '(?P<pattern>.*)'", re.DOTALL)
ERROR = re.compile(r"(?P<why>.*?)(?: - at (?:`key` in )?`\$(?P<path>[^`]*)`)?", re.DOTALL)
FIELD_OF = re.compile(r"Object (?:contains unknown|missing required) field `(?P<name>[^`]*)`")


class Body(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A request body: a JSON object of these fields and no other."""


def whole(pattern: str) -> str:
    """``pattern`` matched whole. msgspec searches; ``\\Z`` is the end, where Python's ``$``
    also matches before a final newline. The document shows it as ``$`` (ECMA-262's end)."""
    return f"^{pattern}\\Z"


RULE_OF: dict[str, str] = {}  # a pattern as a refusal shows it -> what it asks, in words


def matching(pattern: str, description: str, **meta) -> Meta:
    """A string's rule: ``pattern``, matched whole, and what it asks in words: the field's
    description in the document, and what a refusal says rather than the pattern."""
    RULE_OF.setdefault(f"^{pattern}$", description)  # a pattern shared: its first words, the rule's own
    return Meta(pattern=whole(pattern), description=description, **meta)


def decode(model: type[T], obj, what: str = "body") -> T:
    """``obj`` (parsed JSON) as ``model``, or the refusal naming the field at fault."""
    obj = json_object(obj, set(model.__struct_fields__), what)  # unknown fields first, by name
    try:
        obj = _ints(obj)
    except RecursionError:  # orjson reads 1,024 levels; no body of ours nests past a few
        raise refusal(f"{what} nested too deep", None, "invalid_body") from None
    try:
        return msgspec.convert(obj, model)
    except msgspec.ValidationError as e:
        raise refusal_of(e) from e


def refusal_of(e: msgspec.ValidationError) -> InvalidFieldError:
    m = ERROR.fullmatch(str(e).replace("\\\\Z'", "$'"))  # the pattern as the document shows it
    why, path = m["why"], (m["path"] or "").lstrip(".").split("[", 1)[0]
    shown = (unmatched := UNMATCHED.fullmatch(why)) and unmatched["pattern"].replace("\\\\", "\\")
    if shown in RULE_OF:  # the pattern is shown as a repr: its backslashes doubled
        rule = RULE_OF[shown].rstrip(".")
        why = f"want {rule[0].lower()}{rule[1:]}"
    code = "out_of_range" if OUT_OF_RANGE.match(why) else "invalid_field"
    if named := FIELD_OF.match(why):  # the message names the field
        path = f"{path}.{named['name']}" if path else named["name"]
        return refusal(why, path, "unknown_field" if "unknown" in why else code)
    return refusal(f"{path}: {why}" if path else why, path or None, code)


def _ints(value: Any) -> Any:
    """JSON has one number type: 5.0 and 1e3 are integers, as JSON Schema reads them (and an
    integer past 64 bits, which orjson reads as a float, is refused by the field's bounds)."""
    if type(value) is dict:
        return {k: _ints(v) for k, v in value.items()}
    if type(value) is list:
        return [_ints(v) for v in value]
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# The field types bodies share, each with its rule.
MAX_INT64 = (1 << 63) - 1  # a larger JSON integer is read as a float, and refused by its bounds
Name = Annotated[
    str,
    matching(
        NAME_PATTERN,
        description="A topic or group name: 1-128 of `A-Z a-z 0-9 . _ -`, not starting with `. _ -`.",
    ),
]
Tag = Annotated[str, matching(TAG_PATTERN, description="1-64 of `A-Z a-z 0-9 . _ -`")]
MessageId = Annotated[
    str,
    matching(
        ID_PATTERN,
        description="16 lowercase hex digits: the delivery hour, then the index in that hour.",
    ),
]
Key = Annotated[str, Meta(min_length=1, max_length=MAX_KEY)]
EpochMs = Annotated[int, Meta(ge=0, le=MAX_INT64, description="Unix epoch milliseconds")]
DateTime = Annotated[
    str, Meta(description="RFC 3339, with a zone", extra_json_schema={"format": "date-time"})
]
Duration = (
    Annotated[int, Meta(ge=0, le=MessageLimits().max_delay_ms, description="ms")]
    | Annotated[
        str,
        matching(
            DURATION_PATTERN,
            description="a count and a unit: `500ms`, `90s`, `5m`, `2h`, `3d`",
        ),
    ]
)
MessageBody = Annotated[
    str, Meta(description=f"UTF-8 text; at most {MessageLimits().max_body_bytes} bytes encoded (413 beyond)")
]
BodyB64 = Annotated[  # the pattern is shown; message_json decodes it (base64, validate=True)
    str,
    Meta(
        description=f"standard base64 with padding; at most {MessageLimits().max_body_bytes} bytes decoded "
        "(413 beyond)",
        extra_json_schema={"pattern": f"^{BASE64_PATTERN}$"},
    ),
]
Tags = Annotated[
    Tag | Annotated[list[Tag], Meta(max_length=MAX_TAGS)], Meta(description="one tag, or a list of them")
]
HeaderValue = Annotated[str, Meta(max_length=MAX_HEADER_VALUE)]


def any_case(text: str) -> str:
    """A pattern matching ``text`` in any letter case (JSON Schema patterns take no flags)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in text)


# A name the node keeps for the copies it makes, in any case (message_json refuses it lowered).
RESERVED_HEADER = "^" + any_case(RESERVED_HEADER_PREFIX)
HeaderName = Annotated[
    str, Meta(max_length=MAX_HEADER_NAME, extra_json_schema={"not": {"pattern": RESERVED_HEADER}})
]
