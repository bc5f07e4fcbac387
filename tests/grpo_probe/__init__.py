"""A test-only domain for ``train grpo``: the calendar, with one known reward term added per
rollout so a GRPO group's rewards always differ (see ``grpo_env``)."""
