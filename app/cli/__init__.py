"""The `specchat` command, one module per command group: the group itself
with the chat and `bench` (main), `run` and `run --server` (run,
run_server), the model commands (models), `history` (history), and the
options and error line they share (options)."""
