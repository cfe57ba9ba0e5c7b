"""Training tasks: what the trainer optimises.

A task builds its model and inputs and gives its loss as additive sums plus the whole
batch's denominators, so gradient accumulation over micro-batches is exact. The trainer
is the same for all of them; `config.task` picks one from TASKS.
"""


def _pretraining():
  from bert_jax.tasks.pretraining import PretrainingTask
  return PretrainingTask()


def _family(name):
  def make():
    from bert_jax.tasks import families
    return {"glue": families.GlueTask, "conll": families.ConllTask,
            "squad": families.SquadTask, "swag": families.SwagTask}[name]()
  return make


TASKS = {"pretraining": _pretraining, "glue": _family("glue"), "conll": _family("conll"),
         "squad": _family("squad"), "swag": _family("swag")}


def get_task(name: str):
  if name not in TASKS:
    raise ValueError(f"config.task={name!r}: expected one of {sorted(TASKS)}")
  return TASKS[name]()
