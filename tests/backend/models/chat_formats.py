"""Chat templates in each family's published format, written here for the tests (no hub): ChatML
for Qwen and SmolLM, Llama 3's header tokens, Gemma's turns (the system message folded into the
first user turn, the assistant called ``model``), Mistral's ``[INST]``, Phi-3's, OLMo 2's and
GLM-4.5's role tags. Each marks the assistant's turns with ``{% generation %}``, as the published templates
that support transformers' assistant mask do, so that transformers' own mask is the oracle of
which tokens train."""

from __future__ import annotations

CHATML = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' }}"
    "{% if m.role == 'assistant' %}{% generation %}{{ m.content + '<|im_end|>' }}{% endgeneration %}"
    "{% else %}{{ m.content + '<|im_end|>' }}{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' }}"
    "{% if m.role == 'assistant' %}{% generation %}{{ m.content | trim + '<|eot_id|>' }}{% endgeneration %}"
    "{% else %}{{ m.content | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
GEMMA = (
    "{{ bos_token }}{% if messages[0].role == 'system' %}{% set first = messages[0].content + '\\n\\n' %}"
    "{% set messages = messages[1:] %}{% else %}{% set first = '' %}{% endif %}"
    "{% for m in messages %}{% set role = 'model' if m.role == 'assistant' else m.role %}"
    "{{ '<start_of_turn>' + role + '\\n' }}{% if m.role == 'assistant' %}{% generation %}"
    "{{ m.content | trim + '<end_of_turn>' }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ (first if loop.first else '') + m.content | trim + '<end_of_turn>\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)
MISTRAL = (
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}"
    "{{ ' ' + m.content + eos_token }}{% endgeneration %}{% elif m.role == 'system' %}"
    "{{ '[INST] ' + m.content + '\\n\\n' }}{% else %}"
    "{% set after_system = loop.index0 > 0 and messages[loop.index0 - 1].role == 'system' %}"
    "{{ ('' if after_system else '[INST] ') + m.content + ' [/INST]' }}"
    "{% endif %}{% endfor %}"
)
PHI3 = (
    "{% for m in messages %}{{ '<|' + m.role + '|>\\n' }}{% if m.role == 'assistant' %}{% generation %}"
    "{{ m.content + '<|end|>' }}{% endgeneration %}{{ '\\n' }}{% else %}{{ m.content + '<|end|>\\n' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
OLMO2 = (
    "{{ bos_token }}{% for m in messages %}{{ '<|' + m.role + '|>\\n' }}{% if m.role == 'assistant' %}"
    "{% generation %}{{ m.content + eos_token }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ m.content + '\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
GLM4 = (  # GLM-4.5's: [gMASK]<sop>, then role tags; an assistant turn ends where the next tag begins
    "{{ '[gMASK]<sop>' }}{% for m in messages %}{{ '<|' + m.role + '|>\n' }}{% if m.role == 'assistant' %}"
    "{% generation %}{{ m.content + ('' if loop.last else '\n') }}{% endgeneration %}{% if loop.last %}"
    "{{ eos_token }}{% endif %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
# format -> (template, bos token, eos token)
FORMATS = {
    "chatml": (CHATML, None, "<|im_end|>"),
    "llama3": (LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "gemma": (GEMMA, "<bos>", "<end_of_turn>"),
    "mistral": (MISTRAL, "<s>", "</s>"),
    "phi3": (PHI3, None, "<|end|>"),
    "olmo2": (OLMO2, "<|endoftext|>", "<|endoftext|>"),
    "glm4": (GLM4, None, "<|endoftext|>"),
}
# the tests' family builders (``families.FAMILIES``) -> the format their chat models publish
FAMILY_FORMAT = {
    "tinyllama": "llama3",
    "smollm2": "chatml",
    "llama3.2": "llama3",
    "mistral": "mistral",
    "qwen2.5": "chatml",
    "qwen3": "chatml",
    "gemma3": "gemma",
    "olmo2": "olmo2",
    "phi3": "phi3",
    "smollm3": "chatml",
    "qwen3-moe": "chatml",
    "qwen2-moe": "chatml",
    "olmoe": "olmo2",  # OLMoE's instruct models use Tulu's role tags, as OLMo 2's do
    "mixtral": "mistral",
    "glm4-moe": "glm4",
}
SPECIALS = (
    "<s>",
    "</s>",
    "<|im_start|>",
    "<|im_end|>",
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<bos>",
    "<start_of_turn>",
    "<end_of_turn>",
    "[INST]",
    "[/INST]",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
    "<|end|>",
    "<|endoftext|>",
    "[gMASK]",
    "<sop>",
)


def chat_tokenizer(directory, family: str):
    """A byte-level BPE tokenizer folder whose chat template is ``family``'s format."""
    from tests.backend.data.test_hf_tokenizer_files import hf_folder

    template, bos, eos = FORMATS[FAMILY_FORMAT[family]]
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, **({"bos_token": bos} if bos else {})}
    folder = hf_folder(directory, config, specials=SPECIALS)
    (folder / "chat_template.jinja").write_text(template)
    return folder
