"""The health area: Gym's rollout health checks and perf summary over the stored records."""
