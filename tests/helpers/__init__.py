"""What the tests share and no test file defines: fixtures' building blocks (runs), HF
reference models and parity checks (hf_reference), the family tables' round trips
(family_tables), synthetic corpora (corpora), small TF checkpoints and taggers
(checkpoints), tokenizer samples, a Hub-shaped server, the target compilers' skips
(targets). Test files import from here, never from each other."""
