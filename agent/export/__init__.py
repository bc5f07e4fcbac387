"""Training-side export: recorded episodes → TRL datasets (SFT rows, GRPO prompts) and a stats report."""
