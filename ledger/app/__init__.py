"""The composition root: bootstrap, the HTTP app and the CLI, built from the list of areas."""
