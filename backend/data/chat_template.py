"""A Hugging Face tokenizer's chat template, rendered as transformers' ``apply_chat_template``
renders it (a sandboxed Jinja environment with the same filters and functions), and a
conversation cut into what trains and what does not.

Which text is an assistant's: where the template marks it with ``{% generation %}`` (as
transformers' assistant mask and TRL's ``assistant_only_loss`` read it), the marked text trains
and nothing else. A template without markers is rendered turn by turn: the text it renders for
the turns before an assistant's, ending with the generation prompt (``add_generation_prompt``),
is context; what the assistant's turn adds after it (its content and the template's end-of-turn
marker, and whatever the template writes before the next turn) trains; such a template that
renders earlier turns differently once later ones follow (one that drops earlier reasoning, say)
is refused by name.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

ASSISTANT = "assistant"
# where a {% generation %} block begins and ends in a rendering: private-use characters, removed
# from the text the conversation is written as
START, END = "\ue000", "\ue001"
MARKS = re.compile(f"([{START}{END}])")


class ChatTemplateError(ValueError):
    """A template that cannot say which text is an assistant's, or a conversation it refuses."""


def _generation_extension():
    """``{% generation %}...{% endgeneration %}`` (transformers' marker of an assistant's text)
    rendered as its body between ``START`` and ``END``; the class is ``marked`` once a template
    it compiles has one (a class a template, made afresh for each)."""
    from jinja2 import nodes
    from jinja2.ext import Extension

    class Generation(Extension):
        tags = frozenset({"generation"})
        marked = False

        def parse(self, parser):
            line = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            type(self).marked = True
            begin, end = nodes.Output([nodes.TemplateData(START)]), nodes.Output([nodes.TemplateData(END)])
            return [begin, nodes.Scope(body, lineno=line), end]

    return Generation


def _raise(message: str):
    raise ChatTemplateError(f"the chat template refused the conversation: {message}")


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def template_source(directory: Path) -> str | None:
    """The chat template a Hugging Face tokenizer folder holds: ``chat_template.jinja``, else
    ``tokenizer_config.json``'s ``chat_template`` (a string, or named templates: the default
    one); None where it has none."""
    if (directory / "chat_template.jinja").is_file():
        return (directory / "chat_template.jinja").read_text()
    config = directory / "tokenizer_config.json"
    template = json.loads(config.read_text()).get("chat_template") if config.is_file() else None
    if isinstance(template, list):  # [{"name": ..., "template": ...}]
        named = {entry.get("name"): entry.get("template") for entry in template if isinstance(entry, dict)}
        template = named.get("default")
    return template if isinstance(template, str) else None


class ChatTemplate:
    """``source`` compiled; ``tokens`` are the special tokens it may name (``bos_token``, ``eos_token``...)."""

    def __init__(self, source: str, tokens: dict[str, str]):
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        generation = _generation_extension()
        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[generation, jinja2.ext.loopcontrols]
        )
        environment.filters["tojson"] = _tojson
        environment.globals["raise_exception"] = _raise
        environment.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
        try:
            self.template = environment.from_string(source)
        except jinja2.TemplateSyntaxError as error:
            raise ChatTemplateError(f"the chat template is not valid Jinja: {error}") from None
        self.tokens = tokens
        self.marked: bool = generation.marked  # whether it has {% generation %} blocks

    def render(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        """The conversation as the template writes it (``apply_chat_template(tokenize=False)``)."""
        return MARKS.sub("", self._render(messages, add_generation_prompt))

    def _render(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        from jinja2 import TemplateError

        try:
            return self.template.render(messages=messages, add_generation_prompt=add_generation_prompt, **self.tokens)
        except TemplateError as error:  # an undefined value it reads, say: messages[0] of none
            said = f"the chat template failed on {len(messages)} message(s) of the conversation: {error}"
            raise ChatTemplateError(said) from None

    def pieces(self, messages: list[dict], first: int = 0) -> list[tuple[str, bool]]:
        """The conversation rendered, cut into (text, trains) pieces in order: the text of each
        assistant turn from message ``first`` on trains, the rest (system, user and tool turns,
        the template's headers, a prompt's turns before ``first``) does not."""
        if self.marked:
            return self._marked_pieces(messages, first)
        whole = self.render(messages)
        pieces, at = [], 0
        for turn, message in enumerate(messages):
            if message["role"] != ASSISTANT or turn < first:
                continue
            before = self.render(messages[:turn], add_generation_prompt=True)
            through = self.render(messages[: turn + 1])
            if not (len(before) >= at and through.startswith(before) and whole.startswith(through)):
                raise ChatTemplateError(
                    f"the chat template renders the conversation's turns before message {turn} differently once "
                    "later ones follow (as templates that drop earlier reasoning do), so which text is the "
                    "assistant's is unclear; give one record per assistant turn"
                )
            pieces += [(whole[at : len(before)], False), (whole[len(before) : len(through)], True)]
            at = len(through)
        pieces.append((whole[at:], False))
        return [(text, trains) for text, trains in pieces if text]

    def _marked_pieces(self, messages: list[dict], first: int) -> list[tuple[str, bool]]:
        """The pieces of a template with ``{% generation %}`` blocks: what they mark trains,
        past the text the prompt's messages (those before ``first``) render."""
        if any(MARKS.search(str(m.get("content", ""))) for m in messages):
            raise ChatTemplateError("a message holds a private-use character U+E000 or U+E001, which mark the turns")
        prompt = len(self.render(messages[:first])) if first else 0
        pieces, inside, at = [], False, 0
        for part in MARKS.split(self._render(messages)):
            if part in (START, END):
                inside = part == START
            elif part:
                pieces.append((part, inside and at >= prompt))
                at += len(part)
        return pieces


def check_messages(messages, where: str) -> list[dict]:
    """``messages`` if it is a conversation (a list of objects, each with a string ``role``),
    else a ValueError naming ``where`` it was read."""
    if not isinstance(messages, list) or not messages:
        return _bad(where, "is not a list of messages")
    for number, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return _bad(where, f"message {number} is not an object with a string 'role'")
    return messages


def _bad(where: str, why: str):
    raise ValueError(f"{where}: the conversation {why} (each like {{'role': 'user', 'content': '...'}})")
