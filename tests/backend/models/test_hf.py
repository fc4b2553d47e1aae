"""Hugging Face LLaMA checkpoints: loaded, our loss is transformers'; exported, transformers
loads them to the same loss; unsupported options are refused by name."""

import json
import re
import subprocess
import sys

import pytest
import torch

from hotswitch.backend import get_config
from hotswitch.backend.dist_state import Box
from hotswitch.backend.models.hf import HFCheckpoint, config_from_hf, load_pretrained, save_pretrained
from hotswitch.backend.models.llama import Transformer

from .hf_fixtures import load_with_transformers, make_checkpoint, our_loss, tokens, transformers_loss

CASES = {
    "grouped-query": {},
    "tied embeddings": {"tie_word_embeddings": True},
    "multi-head, rope_theta 1e6": {"num_key_value_heads": 8, "rope_theta": 1e6, "rms_norm_eps": 1e-5},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loaded_models_loss_equals_transformers(tmp_path, case):
    reference = make_checkpoint(tmp_path, **CASES[case])
    model = load_pretrained(tmp_path)
    ids = tokens()
    assert our_loss(model, ids) == pytest.approx(transformers_loss(reference, ids), rel=1e-5)


def test_config_carries_every_shape_option(tmp_path):
    make_checkpoint(tmp_path, num_key_value_heads=2, rope_theta=123.0, rms_norm_eps=1e-5, tie_word_embeddings=True)
    config = config_from_hf(tmp_path)
    assert (config.vocab_size, config.dim, config.n_layers, config.n_heads, config.n_kv_heads) == (128, 64, 2, 8, 2)
    assert (config.ffn_dim, config.max_seq_len, config.rope_theta, config.norm_eps) == (96, 64, 123.0, 1e-5)
    assert config.tie_embeddings


def test_a_tied_checkpoint_is_one_parameter_that_the_head_reads(tmp_path):
    make_checkpoint(tmp_path, tie_word_embeddings=True)
    model = load_pretrained(tmp_path)
    assert not hasattr(model, "output"), "a tied head has no weight of its own"
    assert "output.weight" not in dict(model.named_parameters())
    assert list(model.config.param_shapes()) == [n for n, _ in model.named_parameters()]
    assert model.config.n_params == sum(p.numel() for p in model.parameters())
    ids = tokens()
    model.zero_grad()
    (model(ids[:, :-1], ids[:, 1:]) / ids[:, 1:].numel()).backward()
    reference = load_with_transformers(tmp_path)
    reference(input_ids=ids, labels=ids).loss.backward()
    grad = reference.model.embed_tokens.weight.grad  # the embedding's and the head's, summed
    assert torch.allclose(model.tok_embeddings.weight.grad, grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("tied", [False, True])
def test_export_reloads_to_equal_tensors_and_transformers_loads_it(tmp_path, tied):
    make_checkpoint(tmp_path / "hf", tie_word_embeddings=tied)
    model = load_pretrained(tmp_path / "hf")
    save_pretrained(model, tmp_path / "ours")
    again = load_pretrained(tmp_path / "ours")
    assert again.config.with_(name=model.config.name) == model.config
    mine, theirs = model.state_dict(), again.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[n], theirs[n]) for n in mine)
    ids = tokens()
    loaded = load_with_transformers(tmp_path / "ours")
    assert transformers_loss(loaded, ids) == pytest.approx(our_loss(model, ids), rel=1e-5)


def test_sharded_checkpoints_load_both_ways(tmp_path):
    reference = make_checkpoint(tmp_path / "hf", max_shard_size="40KB")
    assert (tmp_path / "hf" / "model.safetensors.index.json").is_file()
    model = load_pretrained(tmp_path / "hf")
    ids = tokens()
    assert our_loss(model, ids) == pytest.approx(transformers_loss(reference, ids), rel=1e-5)
    save_pretrained(model, tmp_path / "ours", max_shard_bytes=40_000)
    index = json.loads((tmp_path / "ours" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    assert transformers_loss(load_with_transformers(tmp_path / "ours"), ids) == pytest.approx(
        transformers_loss(reference, ids), rel=1e-5
    )


def test_a_box_is_read_without_the_rest(tmp_path):
    make_checkpoint(tmp_path)
    full = HFCheckpoint(tmp_path).read("layers.1.attention.wk.weight")
    box = Box((8, 16), (8, 32))
    assert torch.equal(HFCheckpoint(tmp_path).read("layers.1.attention.wk.weight", box), full[box.slices()])


def edit_config(directory, **changes):
    path = directory / "config.json"
    raw = json.loads(path.read_text())
    raw.update(changes)
    path.write_text(json.dumps(raw))


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}}, "rope_type='longrope'"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope_type='dynamic'"),
        ({"model_type": "deepseek_v3"}, "model_type='deepseek_v3'"),
        ({"architectures": ["MistralForCausalLM"]}, "architectures=['MistralForCausalLM']"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
        ({"final_logit_softcapping": 30.0}, "final_logit_softcapping=30.0"),
        ({"num_local_experts": 8}, "num_local_experts=8 (this family has no mixture of experts here; the "),
        ({"attention_dropout": 0.1}, "attention_dropout=0.1"),
    ],
)
def test_unsupported_options_are_refused_by_name(tmp_path, changes, named):
    make_checkpoint(tmp_path)
    edit_config(tmp_path, **changes)
    with pytest.raises(ValueError, match=re.escape("unsupported Hugging Face option " + named)):
        load_pretrained(tmp_path)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"head_dim": 16}, r"model.layers.0.self_attn.q_proj.weight gives layers.0.attention.wq.weight the shape"),
        ({"attention_bias": True}, r"missing \['model.layers.0.self_attn.k_proj.bias'"),
    ],
)
def test_a_config_that_the_tensors_disagree_with_is_refused_naming_the_tensor(tmp_path, changes, named):
    make_checkpoint(tmp_path)
    edit_config(tmp_path, **changes)
    with pytest.raises(ValueError, match=named):
        load_pretrained(tmp_path)


def test_a_folder_without_config_or_weights_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        load_pretrained(tmp_path)
    make_checkpoint(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"neither model\.safetensors nor"):
        load_pretrained(tmp_path)


def test_tensors_of_another_model_are_refused(tmp_path):
    make_checkpoint(tmp_path)
    edit_config(tmp_path, num_hidden_layers=3)
    with pytest.raises(ValueError, match=r"missing \['model.layers.2"):
        load_pretrained(tmp_path)


def test_importing_the_module_does_not_import_transformers():
    code = "import sys, hotswitch.backend.models.hf; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_released_presets_are_distinct_from_the_papers_shapes():
    paper, released = get_config("7b"), get_config("llama2-7b")
    assert paper.vocab_size == 30592 and released.vocab_size == 32000
    assert paper.with_(name=released.name, vocab_size=32000) == released
    llama3 = get_config("llama3-8b")
    assert (llama3.vocab_size, llama3.n_kv_heads, llama3.ffn_dim, llama3.rope_theta) == (128256, 8, 14336, 5e5)
    with torch.device("meta"):
        model = Transformer(llama3)
    assert llama3.n_params == sum(p.numel() for p in model.parameters()) == 8_030_261_248


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"router_jitter_noise": 0.1}, "router_jitter_noise=0.1 (the router's training noise is not computed"),
    ],
)
def test_a_router_option_the_engine_does_not_compute_is_refused_by_name(tmp_path, changes, named):
    from .families import make_family

    make_family(tmp_path, "mixtral")
    edit_config(tmp_path, **changes)
    with pytest.raises(ValueError, match=re.escape("unsupported Hugging Face option " + named)):
        load_pretrained(tmp_path)


def test_a_moe_checkpoint_missing_an_expert_is_refused_naming_the_tensor(tmp_path):
    from safetensors.torch import load_file, save_file

    from .families import make_family

    make_family(tmp_path, "qwen3-moe")
    tensors = load_file(tmp_path / "model.safetensors")
    del tensors["model.layers.0.mlp.experts.3.up_proj.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=re.escape("missing ['model.layers.0.mlp.experts.3.up_proj.weight']")):
        load_pretrained(tmp_path)


@pytest.mark.parametrize("family", ["qwen2-moe", "qwen3-moe", "mixtral", "glm4-moe"])
def test_a_moe_checkpoint_exports_the_tensors_it_loaded_and_reloads_to_equal_ones(tmp_path, family):
    """Each expert's tensors unstacked under their own names, a shared expert and its gate too, a
    sigmoid router's choice bias (GLM-4.5's ``e_score_correction_bias``) as it was loaded."""
    from safetensors.torch import load_file

    from .families import make_family

    make_family(tmp_path / "hf", family)
    model = load_pretrained(tmp_path / "hf")
    save_pretrained(model, tmp_path / "ours", like=tmp_path / "hf")
    source, exported = (
        load_file(tmp_path / "hf" / "model.safetensors"),
        load_file(tmp_path / "ours" / "model.safetensors"),
    )
    assert exported.keys() == source.keys()
    assert all(torch.equal(exported[n], source[n]) for n in source)
    again = load_pretrained(tmp_path / "ours")
    assert again.config.with_(name=model.config.name) == model.config
    mine, theirs = model.state_dict(), again.state_dict()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[n], theirs[n]) for n in mine)


def test_qwen2_moe_reads_its_own_bias_switch_and_sliding_layers_as_transformers_does():
    """``qkv_bias`` (no attention_bias), and without ``layer_types`` the layers transformers' own
    config makes sliding (every other one below ``max_window_layers``)."""
    import transformers

    from hotswitch.backend.models.hf_config import config_from_dict

    theirs = transformers.Qwen2MoeConfig(
        num_hidden_layers=6, use_sliding_window=True, sliding_window=12, max_window_layers=4, qkv_bias=False
    )
    raw = json.loads(theirs.to_json_string())
    expected = tuple("sliding" if kind == "sliding_attention" else "full" for kind in raw.pop("layer_types"))
    config = config_from_dict(raw)
    assert config.layer_kinds == expected == ("sliding", "full", "sliding", "full", "full", "full")
    assert (config.sliding_window, config.qkv_bias, config.o_bias) == (12, False, False)
    assert config.experts is not None and (config.experts.shared_ffn_dim, config.experts.shared_gate) == (5632, True)


def test_a_shared_expert_on_a_family_without_one_is_refused_by_name(tmp_path):
    from .families import make_family

    make_family(tmp_path, "qwen3-moe")
    edit_config(tmp_path, shared_expert_intermediate_size=64)
    named = "option shared_expert_intermediate_size=64 (a shared expert is read for qwen2_moe"
    with pytest.raises(ValueError, match=re.escape(named)):
        load_pretrained(tmp_path)


def test_glm4_moe_reads_its_defaults_and_biases_as_transformers_does():
    """Half of each head rotated where the config leaves ``partial_rotary_factor`` out,
    ``attention_bias`` on q, k and v only, q/k norms only where ``use_qk_norm``; the first
    ``first_k_dense_replace`` layers dense."""
    import transformers

    from hotswitch.backend.models.hf_config import config_from_dict

    shape = {"hidden_size": 64, "num_attention_heads": 8, "head_dim": 16, "num_hidden_layers": 4}
    raw = json.loads(transformers.Glm4MoeConfig(**shape, attention_bias=True).to_json_string())
    raw["rope_parameters"].pop("partial_rotary_factor")
    config = config_from_dict(raw)
    assert (config.partial_rotary, config.qkv_bias, config.o_bias, config.qk_norm) == (0.5, True, False, "none")
    experts = config.experts
    assert (
        experts is not None
        and experts.layers == (1, 2, 3)
        and (experts.scoring, experts.score_bias)
        == (
            "sigmoid",
            True,
        )
    )
    assert config_from_dict({**raw, "use_qk_norm": True}).qk_norm == "head"


def test_a_checkpoints_multi_token_prediction_layers_are_left_out_and_only_those(tmp_path):
    """GLM-4.5 stores its ``num_nextn_predict_layers`` after the decoder's; transformers loads and
    trains none of them, nor does hotswitch. A layer past them is still refused by name."""
    from safetensors.torch import load_file, save_file

    from .families import make_family

    make_family(tmp_path, "glm4-moe")
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["model.layers.4.eh_proj.weight"] = torch.zeros(4, 8)  # the tiny model has 4 layers: 0-3
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    edit_config(tmp_path, num_nextn_predict_layers=1)
    assert load_pretrained(tmp_path).config.n_layers == 4
    edit_config(tmp_path, num_nextn_predict_layers=0)
    with pytest.raises(ValueError, match=re.escape("unexpected ['model.layers.4.eh_proj.weight']")):
        load_pretrained(tmp_path)
