"""Model-call captures: Gym's capture lines, the capture projection, routes, mirror, importer."""
