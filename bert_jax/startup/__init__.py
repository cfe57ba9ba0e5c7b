"""Program start-up: how every command line ends on an error (cli.py), the --config
flag (config_flag.py), a quiet start (quiet.py) and TensorFlow imported on first use (lazy.py).
Imports nothing of bert_jax above files/."""
