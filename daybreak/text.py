"""Text helpers every layer may use (no daybreak imports): messages squeezed onto one line."""

from __future__ import annotations


def one_line(message: object, limit: int | None = None, *, with_type: bool = False) -> str:
    """``message`` (an exception, or any text) on one line: whitespace runs, newlines included, become one space.

    * an exception with no text gives its type name (``TimeoutError``); ``with_type=True`` always prefixes the
      type name (``ValueError: bad value``, or ``ValueError: (no message)``);
    * ``limit``: longer results are cut to ``limit`` characters, the last three being ``...``.
    """
    text = " ".join(str(message).split())
    if with_type:
        text = f"{type(message).__name__}: {text or '(no message)'}"
    elif not text and isinstance(message, BaseException):
        text = type(message).__name__
    if limit is not None and len(text) > limit:
        text = text[: limit - 3] + "..."
    return text
