"""Submitter tokens: the host's token file, the constant-time match, and the check the door makes on a request's
headers before any of its body is read (daybreak.leaderboard.web.door)."""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from pathlib import Path

from daybreak.errors import ConfigError

MIN_TOKEN_CHARS = 16
# the routes that take a submitter token (POST): what the door checks before it reads a body
TOKEN_ROUTES = (re.compile(r"^/api/submissions$"), re.compile(r"^/api/entries/[^/]*/reproduce$"))


@dataclass(frozen=True)
class Token:
    name: str
    secret: bytes


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    headers: tuple[tuple[str, str], ...] = ()


def load_tokens(path: str | Path) -> list[Token]:
    """The host's submitter tokens: one per line, ``TOKEN`` or ``NAME TOKEN``; ``#`` starts a comment line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the token file ({getattr(e, 'strerror', None) or e})") from None
    tokens: list[Token] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) > 2:
            raise ConfigError(f"{path}: line {number}: expected TOKEN or NAME TOKEN")
        name, secret = (parts[0], parts[1]) if len(parts) == 2 else (f"token-{number}", parts[0])
        if len(secret) < MIN_TOKEN_CHARS:
            raise ConfigError(f"{path}: line {number}: token shorter than {MIN_TOKEN_CHARS} characters")
        tokens.append(Token(name[:100], secret.encode("utf-8")))
    if not tokens:
        raise ConfigError(f"{path}: no tokens in the token file")
    return tokens


def match_token(tokens: list[Token], presented: str | bytes | None) -> Token | None:
    """Constant-time comparison against every configured token (no early exit on a match)."""
    if not presented:
        return None
    if isinstance(presented, bytes):
        given = presented  # the header's raw bytes
    else:
        try:
            given = presented.encode("latin-1")  # the header's raw bytes (HTTP headers arrive decoded as latin-1)
        except UnicodeEncodeError:
            given = presented.encode("utf-8", "replace")
    found = None
    for token in tokens:
        if hmac.compare_digest(given, token.secret):
            found = token
    return found


def needs_token(method: str, path: str) -> bool:
    return method == "POST" and any(route.match(path) for route in TOKEN_ROUTES)


def authorize(headers: list[tuple[bytes, bytes]], tokens: list[Token]) -> Token | Refusal:
    """The submitter of a request, from its ``Authorization: Bearer TOKEN`` header (the only header read for it),
    or why it is refused: 403 when submissions are closed, 401 without a token or with one not the host's."""
    if not tokens:
        return Refusal(403, "submissions are closed: this server was started without --token-file")
    header = next((v for k, v in headers if k == b"authorization"), b"")
    presented = header[7:].strip() if header[:7].lower() == b"bearer " else b""
    challenge = (("WWW-Authenticate", "Bearer"),)
    if not presented:
        hint = (" (X-Daybreak-Token is not read: the token goes in the Authorization header)"
                if any(k == b"x-daybreak-token" for k, _ in headers) else "")
        return Refusal(401, f"a submitter token is required (Authorization: Bearer TOKEN){hint}", challenge)
    token = match_token(tokens, presented)
    if token is None:
        return Refusal(401, "invalid submitter token", challenge)
    return token
