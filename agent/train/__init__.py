"""Training side (the ``train`` extra): LoRA SFT on exported trajectories. The runtime never imports this."""
