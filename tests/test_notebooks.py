"""notebooks/ run top to bottom (executed with nbclient, as a user would run them)."""
import os

import nbformat
from nbclient import NotebookClient

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_finetune_glue_notebook_runs_and_learns(minilm_dir, data_dir, monkeypatch, tmp_path):
  del minilm_dir  # the notebook finds the weights itself; this skips without them
  monkeypatch.setenv("BERT_JAX_NOTEBOOK_EXAMPLES", "1280")  # 40 steps, about a minute
  monkeypatch.setenv("BERT_JAX_DATA_DIR", data_dir)
  path = os.path.join(REPO, "notebooks", "finetune_glue.ipynb")
  notebook = nbformat.read(path, as_version=4)
  # A fresh workdir: the notebook writes runs/notebook_sst2_1280 under the repo otherwise.
  notebook.cells.insert(0, nbformat.v4.new_code_cell(
      f"import os; os.environ['BERT_JAX_NOTEBOOK_RUNS'] = {str(tmp_path)!r}"))
  NotebookClient(notebook, timeout=600, kernel_name="python3",
                 resources={"metadata": {"path": os.path.join(REPO, "notebooks")}}).execute()
  outputs = "".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                    for out in cell.get("outputs", []))
  accuracy = float(outputs.split("dev accuracy ")[1].split()[0])
  print(f"notebook: SST-2 dev accuracy after 40 steps on 1,280 sentences: {accuracy:.4f}")
  assert accuracy > 0.7  # all-MiniLM-L6-v2 learns SST-2 well above chance even this briefly
  assert "P(positive)" in outputs
  assert os.path.isfile(tmp_path / "notebook_sst2_1280" / "learning_curve.png")
