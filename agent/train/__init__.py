"""Training side (the ``train`` extra): LoRA SFT, expert iteration and GRPO on the agent's own verified runs. The runtime never imports this."""
