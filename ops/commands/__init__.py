"""One module per command family; each defines `register(cli)`. See `ops.cli`."""
