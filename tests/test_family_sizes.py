"""The family's published sizes: our configs and parameter counts equal HF transformers'.

roberta-base, distilbert-base-uncased, albert-base-v2 and electra-small (and ELECTRA's
generator sizes) as `config_for_size` gives them, against HF's configs; parameter counts of
every encoder and pretraining model counted from shapes only (no weights allocated).
"""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import hf_families  # noqa: E402
from bert_jax.models.bert import BertModel  # noqa: E402
from bert_jax.models.config import config_for_size, generator_config  # noqa: E402
from bert_jax.models.electra import BertForReplacedTokenDetection  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402
from tests.helpers.hf_reference import hf_param_count, our_param_count  # noqa: E402


def test_published_sizes():
  roberta = config_for_size("roberta-base")
  assert (roberta.vocab_size, roberta.max_position_embeddings, roberta.type_vocab_size,
          roberta.layer_norm_eps, roberta.pad_token_id) == (50265, 514, 1, 1e-5, 1)
  distil = config_for_size("distilbert-base-uncased")
  assert (distil.num_hidden_layers, distil.hidden_size, distil.type_vocab_size,
          distil.vocab_size) == (6, 768, 0, 30522)
  # HF AlbertConfig's defaults at albert-base-v2's sizes; ElectraConfig's defaults.
  albert, albert_hf = config_for_size("albert-base-v2"), transformers.AlbertConfig(
      hidden_size=768, num_attention_heads=12, intermediate_size=3072)
  electra, electra_hf = config_for_size("electra-small"), transformers.ElectraConfig()
  for ours, theirs in ((albert, albert_hf), (electra, electra_hf)):
    assert hf_families.config_from_hf(theirs.to_dict()) == ours, ours.family
  assert (albert.embedding_size, albert.vocab_size, albert.hidden_act, albert.layer_sharing) \
      == (128, 30000, "gelu_tanh", "all")
  assert (electra.embedding_size, electra.hidden_size, electra.num_attention_heads,
          electra.intermediate_size) == (128, 256, 4, 1024)
  # The paper's ELECTRA-Small generator: a quarter of the discriminator, same E.
  assert generator_config(electra) == config_for_size("electra-small-generator")
  assert generator_config(config_for_size("electra-tiny"), 0.25) == config_for_size(
      "electra-tiny-generator")


# --- parameter counts at the published sizes ------------------------------------------


def test_parameter_counts_equal_hf_at_published_sizes():
  # HF's defaults, plus roberta-base's published differences from them (its config.json).
  roberta_hf = transformers.RobertaConfig(max_position_embeddings=514, type_vocab_size=1,
                                          layer_norm_eps=1e-5)
  distil_hf = transformers.DistilBertConfig()  # = distilbert-base-uncased
  roberta, distil = config_for_size("roberta-base"), config_for_size("distilbert-base-uncased")
  counts = {
      "roberta encoder": (our_param_count(BertModel(roberta)),
                          hf_param_count(transformers.RobertaModel, roberta_hf)),
      "roberta mlm": (our_param_count(BertForPreTraining(roberta)),
                      hf_param_count(transformers.RobertaForMaskedLM, roberta_hf)),
      "distilbert encoder": (our_param_count(BertModel(distil)),
                             hf_param_count(transformers.DistilBertModel, distil_hf)),
      "distilbert mlm": (our_param_count(BertForPreTraining(distil)),
                         hf_param_count(transformers.DistilBertForMaskedLM, distil_hf)),
  }
  # albert-base-v2: HF AlbertConfig's defaults at base sizes; electra-small: ElectraConfig's.
  albert_hf = transformers.AlbertConfig(hidden_size=768, num_attention_heads=12,
                                        intermediate_size=3072)
  electra_hf = transformers.ElectraConfig()
  albert, electra = config_for_size("albert-base-v2"), config_for_size("electra-small")
  counts.update({
      "albert encoder": (our_param_count(BertModel(albert)),
                         hf_param_count(transformers.AlbertModel, albert_hf)),
      "albert pretraining": (our_param_count(BertForPreTraining(albert)),
                             hf_param_count(transformers.AlbertForPreTraining, albert_hf)),
      "electra encoder": (our_param_count(BertModel(electra)),
                          hf_param_count(transformers.ElectraModel, electra_hf)),
      "electra discriminator": (our_param_count(BertForReplacedTokenDetection(electra)),
                                hf_param_count(transformers.ElectraForPreTraining, electra_hf)),
      "electra generator": (our_param_count(BertForPreTraining(electra)),
                            hf_param_count(transformers.ElectraForMaskedLM, electra_hf)),
  })
  for name, (ours, theirs) in counts.items():
    assert ours == theirs, (name, ours, theirs)
  assert counts["roberta encoder"][0] == 124_645_632
  assert counts["distilbert encoder"][0] == 66_362_880
  assert counts["albert encoder"][0] == 11_683_584
  assert counts["electra encoder"][0] == 13_483_008
