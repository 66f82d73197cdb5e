"""The event kernel, knowing nothing of Gym: events, hash chain, writer, the store's verbs."""
