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
START = "\ue000"
END = "\ue001"
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
        tags = {"generation"}  # noqa: RUF012  # jinja2 declares a class-level set
        marked = False

        def parse(self, parser):
            line = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            type(self).marked = True
            begin = nodes.Output([nodes.TemplateData(START)])
            end = nodes.Output([nodes.TemplateData(END)])
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

    @classmethod
    def for_training(cls, source: str, tokens: dict[str, str]) -> ChatTemplate:
        """The template fine-tuning renders with: ``source`` where it marks the assistant's text,
        else the training version TRL ships of it where TRL is installed (what TRL's
        ``assistant_only_loss`` trains with), else ``source`` read turn by turn."""
        template = cls(source, tokens)
        training = None if template.marked else trl_training_template(source)
        return template if training is None else cls(training, tokens)

    def render(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        """The conversation as the template writes it (``apply_chat_template(tokenize=False)``)."""
        return MARKS.sub("", self._render(messages, add_generation_prompt))

    def _render(self, messages: list[dict], add_generation_prompt: bool = False) -> str:
        from jinja2 import TemplateError

        try:
            messages = aliased(messages)
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
        pieces = []
        at = 0
        for turn, message in enumerate(messages):
            if message["role"] != ASSISTANT or turn < first:
                continue
            before = self.render(messages[:turn], add_generation_prompt=True)
            through = self.render(messages[: turn + 1])
            if not (len(before) >= at and through.startswith(before) and whole.startswith(through)):
                plain = self.render(messages[:turn])  # without the generation prompt
                raise ChatTemplateError(unclear_turn(turn, before, through, plain))
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
        pieces = []
        inside = False
        at = 0
        for part in MARKS.split(self._render(messages)):
            if part in (START, END):
                inside = part == START
            elif part:
                pieces.append((part, inside and at >= prompt))
                at += len(part)
        return pieces


MARKERS_FIX = (
    "mark the assistant's text in the template with {% generation %} ... {% endgeneration %}, as TRL's "
    "training templates do (with trl installed, the training version TRL ships of a template it knows is used)"
)


def unclear_turn(turn: int, before: str, through: str, plain: str) -> str:
    """Why the assistant's text of message ``turn`` cannot be told from its rendering: the turns
    before it render as a prefix of it (``plain``) but the generation prompt does not, or they
    render differently once it follows (or once later turns do)."""
    if through.startswith(plain) and not through.startswith(before):
        common = next((i for i, (a, b) in enumerate(zip(before, through, strict=False)) if a != b), len(before))
        return (
            f"the chat template's generation prompt for message {turn} ends {before[common:][-40:]!r}, but it "
            f"renders the assistant's turn as {through[common:][:40]!r} (a reasoning template that opens the "
            f"turn with its own tag, say), so which text is the assistant's is unclear; {MARKERS_FIX}"
        )
    return (
        f"the chat template renders the conversation up to message {turn} differently once later turns follow "
        f"(it drops earlier turns' reasoning, say), so which text is the assistant's is unclear; {MARKERS_FIX}, "
        "or give one record per assistant turn"
    )


REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")  # the names a message's reasoning goes by


def aliased(messages: list[dict]) -> list[dict]:
    """``messages`` with a message's reasoning under every name templates read it by
    (``reasoning_content``; ``thinking``, which gpt-oss's reads), as transformers passes them."""
    out = []
    for message in messages:
        reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None), None)
        out.append(message if reasoning is None else {"thinking": reasoning, **message, "reasoning_content": reasoning})
    return out


def trl_training_template(source: str) -> str | None:
    """The training version TRL ships of the chat template ``source`` (one that marks the
    assistant's text with ``{% generation %}`` and renders every turn as it renders the last),
    which TRL's ``assistant_only_loss`` swaps in for it; None where TRL is not installed, or
    ships none for this template. Read from the installed package, file by file, as TRL reads
    its own: ``NAME.jinja`` equal to ``source`` -> ``NAME_training.jinja``."""
    try:
        import trl
    except ImportError:
        return None
    folder = Path(trl.__file__).parent / "chat_templates"
    for path in sorted(folder.glob("*.jinja")):
        training = path.with_name(f"{path.stem}_training.jinja")
        if not path.stem.endswith("_training") and training.is_file() and path.read_text() == source:
            return training.read_text()
    return None


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
