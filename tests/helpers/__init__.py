"""What the tests share and no test file defines: fixtures' building blocks (runs), HF
reference models and parity checks (hf_reference), the family tables' round trips
(family_tables), Google TF checkpoints (tf_checkpoints), synthetic corpora (corpora),
tokenizer samples, a Hub-shaped server, the target compilers' skips (targets). Test files
import from here, never from each other."""
