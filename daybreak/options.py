"""One declaration per option: the machinery that turns a typed config into command-line flags, a TOML file format
and a checked Python API.

An option is a field of a typed config (``daybreak.config.RunConfig``) annotated with an :class:`Opt`: its flag,
help, how its text is read (``parse``), the range it allows and which commands take it. From that one
declaration:

- ``add_flags(parser, Model, command)`` adds the flags of every option the command takes (argparse defaults are
  ``SUPPRESS``, so a flag the user did not give is absent, and a config file or the declared default applies);
- ``from_args(Model, args, command)`` builds the config: declared defaults < ``--config FILE`` < flags;
- ``load_toml`` / ``to_toml`` read and write the same fields as a TOML file (unknown keys: one line naming the
  key and the nearest valid one);
- ``Model(**values)`` (the Python API) checks every value with the same ``parse`` functions, so ``0.98``,
  ``"98%"``, a seed or a path mean the same from a flag, a file or a keyword; any mistake is one ``ConfigError``
  line.

Value readers (``parse_target``, ``parse_seed``, ...) live here too: every command that reads a target, a seed, a
count or a price reads it with these.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from daybreak.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SEED_MAX = 2**32 - 1  # seeds go to numpy.random.seed, which takes [0, 2**32 - 1]
INT_MAX = 2**31 - 1  # every other integer fits 32 bits (torch and C would overflow beyond)


# --- value readers: text (a flag, a file) or a typed value (the API) -> the checked value ---------------------------
# Each raises ValueError with the reason only; Opt.check puts the option's name and the value in front of it.

def parse_target(value: Any) -> float:
    """``0.98`` (a fraction in (0, 1]) or ``98%`` (a percent in (0, 100]) -> a fraction. A bare ``98`` is refused:
    a number means one thing only, on every command."""
    if isinstance(value, bool):
        raise ValueError("write a fraction in (0, 1] (0.98) or a percent with % (98%)")
    raw = str(value).strip()
    percent = raw.endswith("%")
    try:
        number = float(raw[:-1] if percent else raw)
    except ValueError:
        raise ValueError("write a fraction in (0, 1] (0.98) or a percent with % (98%)") from None
    if percent:
        if not (math.isfinite(number) and 0 < number <= 100):
            raise ValueError("a percent must be in (0%, 100%]")
        return number / 100.0
    if not (math.isfinite(number) and 0 < number <= 1):
        hint = f"; for a percent write {raw}%" if math.isfinite(number) and 1 < number <= 100 else ""
        raise ValueError(f"a fraction must be in (0, 1]{hint}")
    return number


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError("expected an integer") from None


def parse_seed(value: Any) -> int:
    number = _integer(value)
    if not 0 <= number <= SEED_MAX:
        raise ValueError(f"a seed must be an integer in [0, {SEED_MAX}] (2**32 - 1)")
    return number


def int_at_least(low: int, high: int = INT_MAX) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        number = _integer(value)
        if number > high and high == INT_MAX:
            raise ValueError(f"too large (at most {INT_MAX})")
        if not low <= number <= high:
            raise ValueError(f"must be an integer >= {low}" if high == INT_MAX else f"must be an integer in [{low}, {high}]")
        return number
    return parse


def number_in(low: float, high: float = math.inf, *, low_open: bool = False) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        try:
            number = float(str(value).strip()) if isinstance(value, str) else float(value)
        except (TypeError, ValueError):
            raise ValueError("expected a number") from None
        above = number > low if low_open else number >= low
        if not (math.isfinite(number) and above and number <= high):
            where = f"> {low:g}" if low_open else f">= {low:g}"
            raise ValueError(f"must be a finite number {where}" + (f" and <= {high:g}" if high != math.inf else ""))
        return number
    return parse


def parse_bool(value: Any) -> bool:
    """A boolean is a boolean: true or false in a file, True or False from Python (a flag sets it itself); text
    such as "yes" or a number is refused rather than guessed."""
    if isinstance(value, bool):
        return value
    raise ValueError("expected true or false (a boolean, not text or a number)")


def parse_bool_text(text: str) -> bool:
    """A boolean written as text on a command line (``--set augment=false``): the words true or false, as a TOML
    file writes a boolean (any case). The spellings a file refuses (yes, no, on, off, 1, 0) are refused here too:
    one rule for a boolean wherever it is written."""
    word = text.strip().lower()
    if word not in ("true", "false"):
        raise ValueError("expected true or false")
    return word == "true"


def parse_path(value: Any) -> Path:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise ValueError("expected a path")
    return Path(os.path.expanduser(str(value)))


def parse_text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("expected text")
    if any(ord(c) < 32 and c not in "\t" for c in value):
        raise ValueError("control characters are not allowed")
    return value


def one_of(*choices: str, aliases: dict[Any, str] | None = None) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if aliases and not isinstance(value, str) and value in aliases:
            return aliases[value]
        text = str(value).strip() if isinstance(value, str) else None
        if text is not None and aliases and text in aliases:
            return aliases[text]
        if text not in choices:
            raise ValueError(f"choose one of {', '.join(choices)}")
        return text
    return parse


def parse_assignments(value: Any) -> dict[str, Any]:
    """``--set KEY=VALUE`` items (a list of text) or a table (a file, the API) -> {key: value}. Text values are
    typed later by the recipe's defaults (daybreak.recipes.parse_overrides)."""
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValueError("expected a table of KEY = VALUE (names are text)")
        return dict(value)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError("expected a table of KEY = VALUE (in a file, an [overrides] table; from Python, a dict)")
    out: dict[str, Any] = {}
    for item in value:
        if not isinstance(item, str) or "=" not in item:
            raise ValueError(f"{item!r}: expected KEY=VALUE")
        key, raw = (s.strip() for s in item.split("=", 1))
        out[key] = raw
    return out


# --- the declaration ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Opt:
    """The command-line face of one config field. Put it in the field's annotation:
    ``seed: Annotated[int, Opt("--seed", "seeds every RNG", parse=parse_seed, commands=TRIAL)] = 0``."""

    flag: str  # "--seed"; also names the option in messages
    help: str
    parse: Callable[[Any], Any] | None = None  # text or a typed value -> the checked value (ValueError: the reason)
    commands: frozenset[str] = frozenset()  # the commands that take it
    kind: str = "value"  # value | flag (store_true) | negated (a --no-x flag for a field that defaults to True) |
    #                      boolean (--x and --no-x) | append (repeatable KEY=VALUE) | optional (the bare flag means
    #                      `const`)
    metavar: str | None = None
    const: Any = None  # kind "optional": the value of the bare flag
    choices: tuple[str, ...] | None = None  # shown in --help
    short: str | None = None  # "-q"
    default_help: str | None = None  # how --help states the default when the value itself would not say it
    aliases: tuple[tuple[str, Any], ...] = ()  # deprecated flags that set a fixed value: (("--count-eval", "mlperf"),)
    group: str = ""  # the --help section
    recorded: bool = True  # written to a run's config.toml (False: where this invocation's output goes, etc.)
    help_in: tuple[tuple[str, str], ...] = ()  # (command, help) where a command reads it differently
    also_in: tuple[tuple[str, str], ...] = ()  # (command, flag): another spelling a command accepts (deprecated)

    def check(self, value: Any) -> Any:
        if value is None or self.parse is None:
            return value
        try:
            return self.parse(value)
        except ValueError as e:
            shown = value if isinstance(value, (int, float)) else str(value)[:60]
            raise ConfigError(f"{self.flag} {shown}: {e}") from None

    def help_for(self, command: str, default: Any) -> str:
        text = dict(self.help_in).get(command, self.help)
        if self.kind in ("flag", "negated", "append") or "(default" in text or "(required" in text:
            return text.replace("%", "%%")
        shown = self.default_help if self.default_help is not None else (None if default is None else _shown(default))
        return (text + (f" (default: {shown})" if shown not in (None, "") else "")).replace("%", "%%")


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


class OptionModel(BaseModel):
    """A typed config whose annotated fields are options. Constructing one checks every value with its option's
    ``parse``; unknown names and bad values are one ``ConfigError`` line (never pydantic's multi-line report).

    A subclass is declared ``class RunConfig(OptionModel, init=False)``: a type checker then takes this
    ``__init__(**values: Any)`` instead of synthesizing one from the fields' types (PEP 681), because the readers
    accept more forms than a field's type says (``target="90%"``, a path as text, a count as text from a flag); a
    field read back has its declared type (``RunConfig(target="90%").target`` is the float 0.9)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)
    FILE_TITLE: ClassVar[str] = "config"

    def __init_subclass__(cls, init: bool = True, **kwargs: Any) -> None:
        """``init=False`` is for type checkers (above); pydantic receives the other class keywords."""
        super().__init_subclass__(**kwargs)

    def __init__(self, **values: Any) -> None:
        unknown = [k for k in values if k not in type(self).model_fields]
        if unknown:
            raise ConfigError(unknown_key_message(unknown[0], type(self).model_fields, "option"))
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise ConfigError(validation_message(e, type(self))) from None

    @field_validator("*", mode="before")
    @classmethod
    def _checked(cls, value: Any, info: Any) -> Any:
        opt = cls.options().get(info.field_name)
        return opt.check(value) if opt is not None else value

    @classmethod
    def options(cls) -> dict[str, Opt]:
        """{field name: Opt} in declaration order."""
        cache = cls.__dict__.get("_daybreak_options")
        if cache is None:
            cache = {name: opt for name, f in cls.model_fields.items()
                     for opt in f.metadata if isinstance(opt, Opt)}
            setattr(cls, "_daybreak_options", cache)
        return cache

    @classmethod
    def options_of(cls, command: str) -> dict[str, Opt]:
        return {name: opt for name, opt in cls.options().items() if command in opt.commands}

    @classmethod
    def default_of(cls, name: str) -> Any:
        return cls.model_fields[name].get_default(call_default_factory=True)

    def with_(self: OptionModelT, **changes: Any) -> OptionModelT:
        """A changed copy, checked like a new one."""
        return type(self).model_validate({**self.model_dump(), **changes})


# Where else a name is an option ("runs" -> "an option of `daybreak repeat`, ..."): functions of the key, installed by
# the layers that know the other commands (the command line and the Python API, daybreak/__init__.py), so that a
# key of another command is named as such instead of as a misspelling of the nearest run option.
UNKNOWN_KEY_HINTS: list[Callable[[str], str | None]] = []


OptionModelT = TypeVar("OptionModelT", bound=OptionModel)


def unknown_key_message(key: str, known: Iterable[str], what: str) -> str:
    known = list(known)
    for hint_of in UNKNOWN_KEY_HINTS:
        elsewhere = hint_of(key)
        if elsewhere:
            return f"unknown {what} {key!r}: {elsewhere}"
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else f"; known: {', '.join(known)}"
    return f"unknown {what} {key!r}{hint}"


def validation_message(error: ValidationError, model: type[OptionModel]) -> str:
    first = error.errors()[0]
    name = str(first["loc"][0]) if first.get("loc") else ""
    opt = model.options().get(name)
    where = opt.flag if opt is not None else name
    value = first.get("input")
    shown = "" if isinstance(value, dict) else f" {str(value)[:60]}"
    return f"{where}{shown}: {first['msg']}"


# --- argparse ----------------------------------------------------------------------------------------------------

def add_flags(parser: argparse.ArgumentParser, model: type[OptionModel], command: str, *,
              positional: tuple[str, ...] = (), exclude: tuple[str, ...] = (), title: str | None = None,
              config_file: bool = False, prefix: str = "") -> None:
    """The flags of every option of ``model`` that ``command`` takes (``positional``: these as optional positional
    arguments instead). Absent flags are absent from the namespace (argparse.SUPPRESS), so ``from_args`` can tell
    what the user said from the declared default. ``prefix`` ("a"): flags ``--a-<flag>`` into ``a_<name>`` (the
    same option declared once, taken twice, e.g. by the two arms of ``daybreak ab``)."""
    groups: dict[str, argparse._ArgumentGroup] = {}

    def group_for(opt: Opt) -> argparse._ActionsContainer:
        name = title or opt.group
        if not name:
            return parser
        if name not in groups:
            groups[name] = parser.add_argument_group(name)
        return groups[name]

    if config_file:
        parser.add_argument("--config", type=Path, metavar="FILE", default=argparse.SUPPRESS,
                            help=f"a TOML file with any of these options by their field names (e.g. a run's own "
                                 f"config.toml); flags given here override it")
    for name, opt in model.options_of(command).items():
        if name in exclude:
            continue
        default = model.default_of(name)
        help_text = opt.help_for(command, default)
        if name in positional:
            parser.add_argument(name, nargs="?", default=argparse.SUPPRESS, metavar=name.upper(), help=help_text)
            continue
        g = group_for(opt)
        flags = [opt.flag] + ([opt.short] if opt.short else []) + [f for c, f in opt.also_in if c == command]
        dest = name
        if prefix:
            flags, dest = [f"--{prefix}-{opt.flag[2:]}"], f"{prefix}_{name}"
        common: dict[str, Any] = dict(dest=dest, default=argparse.SUPPRESS, help=help_text)
        if opt.kind == "flag":
            g.add_argument(*flags, action="store_true", **common)
        elif opt.kind == "negated":
            g.add_argument(*flags, action="store_false", **common)
        elif opt.kind == "boolean":  # --x / --no-x
            g.add_argument(*flags, action=argparse.BooleanOptionalAction, **common)
        elif opt.kind == "append":
            g.add_argument(*flags, action="append", metavar=opt.metavar or "KEY=VALUE", **common)
        elif opt.kind == "optional":
            g.add_argument(*flags, nargs="?", const=opt.const, metavar=opt.metavar, **common)
        else:
            g.add_argument(*flags, metavar=opt.metavar or ("{" + ",".join(opt.choices) + "}" if opt.choices else None),
                           **common)
        for alias, value in () if prefix else opt.aliases:
            g.add_argument(alias, dest=f"{ALIAS}{name}", action="append_const", const=(alias, value),
                           default=argparse.SUPPRESS, help=f"deprecated: the same as {opt.flag} {value}")


ALIAS = "_deprecated_alias_"


def given(args: argparse.Namespace, model: type[OptionModel], command: str, prefix: str = "") -> dict[str, Any]:
    """The options the user gave on the command line (raw values, not yet checked). A deprecated alias flag
    (``--count-eval``) sets its value, with a warning; contradicting the option itself is one line."""
    dest = (lambda n: f"{prefix}_{n}") if prefix else (lambda n: n)
    out = {name: getattr(args, dest(name)) for name in model.options_of(command) if hasattr(args, dest(name))}
    for name, opt in model.options_of(command).items():
        for alias, value in getattr(args, f"{ALIAS}{name}", []) if not prefix else []:
            if name in out and opt.check(out[name]) != value:
                raise ConfigError(f"{alias} means {opt.flag} {value}; it contradicts {opt.flag} {out[name]}")
            print(f"daybreak: {alias} is deprecated: use {opt.flag} {value}", file=sys.stderr)
            out[name] = value
    return out


def values_for(model: type[OptionModel], args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Every option ``command`` takes, checked: the given value, else the declared default (for commands that take a
    subset of a model's options into a config of their own, e.g. infer)."""
    raw = given(args, model, command)
    return {name: opt.check(raw[name]) if name in raw else model.default_of(name)
            for name, opt in model.options_of(command).items()}


def from_args(model: type[OptionModel], args: argparse.Namespace, command: str, *,
              extra: dict[str, Any] | None = None, base: dict[str, Any] | None = None, prefix: str = "",
              use_file: bool = True) -> Any:
    """The config a command line asks for: declared defaults < ``base`` < ``--config FILE`` (``use_file``) < flags
    < ``extra``."""
    path = getattr(args, "config", None) if use_file else None
    values = merge_values(model, dict(base or {}), _file_values(model, path))
    values = merge_values(model, values, given(args, model, command, prefix))
    values.update(extra or {})
    return model(**values)


def _file_values(model: type[OptionModel], path: Path | None) -> dict[str, Any]:
    return {} if path is None else load_toml(path, model)


def merge_values(model: type[OptionModel], values: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """``values`` updated with ``more``; repeatable KEY=VALUE options (--set) are merged key by key."""
    out = dict(values)
    for name, value in more.items():
        opt = model.options().get(name)
        if opt is not None and opt.kind == "append" and out.get(name):
            merged = parse_assignments(out[name])
            merged.update(parse_assignments(value))
            value = merged
        out[name] = value
    return out


def add_dataclass_flags(parser: argparse.ArgumentParser, cls: type, title: str) -> None:
    """Flags for a dataclass whose fields carry ``metadata={"help": ..., "flag": ...}`` (e.g. the executor's
    options, declared by daybreak.executors)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    g = parser.add_argument_group(title)
    for f in dataclasses.fields(cls):
        flag = f.metadata.get("flag")
        if not flag:
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        shown = "" if default in (None, (), "") else f" (default: {_shown(default)})"
        text = (f.metadata.get("help", "") + shown).replace("%", "%%")
        kind = hints[f.name]
        if kind is bool:
            g.add_argument(flag, dest=f.name, action="store_true", default=argparse.SUPPRESS, help=text)
        elif "tuple" in str(kind):
            g.add_argument(flag, dest=f.name, action="append", default=argparse.SUPPRESS, help=text,
                           metavar=f.metadata.get("metavar", "KEY=VALUE"))
        else:
            g.add_argument(flag, dest=f.name, default=argparse.SUPPRESS, help=text, metavar=f.metadata.get("metavar"))


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    """The dataclass of ``add_dataclass_flags`` from the flags given (text read by each field's type)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.metadata.get("flag") or not hasattr(args, f.name):
            continue
        raw, kind, flag = getattr(args, f.name), str(hints[f.name]), f.metadata["flag"]
        try:
            if "tuple" in kind:
                values[f.name] = tuple(raw)
            elif hints[f.name] is bool:
                values[f.name] = bool(raw)
            elif "int" in kind:
                values[f.name] = _integer(raw)
            elif "float" in kind:
                values[f.name] = number_in(-math.inf)(raw)
            elif "Path" in kind:
                values[f.name] = parse_path(raw)
            else:
                values[f.name] = raw
        except ValueError as e:
            raise ConfigError(f"{flag} {str(raw)[:60]}: {e}") from None
    return cls(**values)


# --- TOML ------------------------------------------------------------------------------------------------------------

def load_toml(path: str | os.PathLike[str], model: type[OptionModel], flag: str = "--config") -> dict[str, Any]:
    """The options in a TOML file, by field name; an unknown key is one line naming it and the nearest valid one.
    Values are checked when the model is built (same readers as the flags). ``flag``: the option that named the
    file (``--a-config``), which every message names."""
    file = Path(path)
    try:
        with open(file, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{flag} {file}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{flag} {file}: is a directory; give a .toml file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{flag} {file}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); a "
                          "TOML file is UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{flag} {file}: not valid TOML ({e})") from None
    except OSError as e:
        raise ConfigError(f"{flag} {file}: cannot read it ({e.strerror or e})") from None
    known = model.options()
    for key in data:
        if key not in known:
            raise ConfigError(f"{flag} {file}: " + unknown_key_message(key, known, "key"))
    return data


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value} cannot be written to TOML")
        return repr(value)
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise ValueError(f"{type(value).__name__} cannot be written to TOML")


def to_toml(values: dict[str, Any], model: type[OptionModel], header: Iterable[str] = ()) -> str:
    """``values`` (field name -> value; None and non-options left out) as a TOML document, each key under its
    help as a comment; tables (dicts) last."""
    lines = [f"# {line}" for line in header]
    tables: list[tuple[str, dict[str, Any]]] = []
    for name, opt in model.options().items():
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, dict):
            tables.append((name, value))
            continue
        lines += [f"# {opt.flag}: {_short(opt.help)}", f"{name} = {toml_value(value)}"]
    for name, table in tables:
        lines += ["", f"# {model.options()[name].flag}: {_short(model.options()[name].help)}", f"[{name}]"]
        lines += [f"{_toml_key(k)} = {toml_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"


def _short(text: str) -> str:
    return textwrap.shorten(text, 110, placeholder=" ...")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() else json.dumps(key)


def iter_help_examples(text: str) -> Iterator[str]:
    """The ``daybreak ...`` command lines in a help text (examples), for the tests that run them."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("daybreak "):
            yield stripped.split("  #", 1)[0].strip()


class HelpFormatter(argparse.HelpFormatter):
    """daybreak's --help: wrapped descriptions, an epilog of examples (text starting ``examples:``) kept line by
    line, and "(default: X)" added once, only where it says something: not when the help already states the
    default, nor for None, False or a flag."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if ("(default" in text or default in (None, False, argparse.SUPPRESS) or action.nargs == 0
                or isinstance(default, list) or not action.option_strings):
            return text
        return text + " (default: %(default)s)"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)
