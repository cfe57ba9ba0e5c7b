"""The task registry: `config.task` -> the Task class that trains it (bert_jax/core/task.py's
contract). A new task is one module under pretrain/ or finetune/ plus one entry here; the
trainer reads tasks only through `make_task`.
"""
import ml_collections

from bert_jax.finetune.classify import ClassifyTask
from bert_jax.finetune.conll import ConllTask
from bert_jax.finetune.glue import GlueTask
from bert_jax.finetune.qa import QaTask
from bert_jax.finetune.squad import SquadTask
from bert_jax.finetune.swag import SwagTask
from bert_jax.finetune.tag import TagTask
from bert_jax.models.config import BertConfig
from bert_jax.pretrain.electra import ElectraTask
from bert_jax.pretrain.task import PretrainingTask
from bert_jax.core.task import Task
from bert_jax.weights import Pretrained

# config.task -> the task class; each is built as Task(config, model_config).
TASKS = {"pretraining": PretrainingTask, "electra": ElectraTask, "glue": GlueTask,
         "conll": ConllTask, "squad": SquadTask, "swag": SwagTask, "classify": ClassifyTask,
         "tag": TagTask, "qa": QaTask}


def task_class(name: str) -> type:
  """The registered class of config.task=name; an unknown name is a one-line error."""
  if name not in TASKS:
    raise ValueError(f"config.task={name!r}: expected one of {sorted(TASKS)}")
  return TASKS[name]


def make_task(config: ml_collections.ConfigDict, model_config: BertConfig,
              source: Pretrained | None = None) -> Task:
  """The task config.task names, for the encoder `model_config`; source: config.init_from
  as the run resolved it (`weights.resolve`), which the task reads instead of resolving
  it again (a cached frozen encoder's weights)."""
  task = task_class(config.task)(config, model_config)
  task.source = source
  return task
