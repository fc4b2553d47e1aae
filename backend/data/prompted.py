"""Supervised fine-tuning data: records holding a prompt and its completion (two fields of one
JSONL line or one table row, as TRL's prompt-completion datasets do), each one document whose
prompt conditions the completion but does not train: only the completion's tokens (and the
end of the document) are targets of the loss, and a step's mean loss is over them alone.
"""

from __future__ import annotations

from hotswitch.backend.data.sources import Context, DocumentSource


class PromptedDocuments(DocumentSource):
    """``completions[i]`` prompted by ``prompts[i]``: two readings of the same records (one per
    field), so the same count in the same order. ``text`` is both, prompt first (what a BPE
    learns from and ``hotswitch data`` measures); ``document`` tokenises them as one
    (``Tokenizer.encode_prompted``), the prompt's tokens its context."""

    def __init__(self, prompts: DocumentSource, completions: DocumentSource):
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions; give the records of one file")
        self.prompts = prompts
        self.completions = completions

    def __len__(self) -> int:
        return len(self.completions)

    def text(self, index: int) -> bytes:
        return self.prompts.text(index) + self.completions.text(index)

    def tokens(self, index: int) -> list[int]:
        return self.document(index)[0]

    def document(self, index: int) -> tuple[list[int], Context]:
        tokens, prompt = self.tokenizer.encode_prompted(self.prompts.text(index), self.completions.text(index))
        return tokens, ((0, prompt),) if prompt else ()

    def describe(self) -> str:
        return f"{self.completions.describe()}, each a prompt and its completion"
