"""Finding, downloading, checking and converting GGUF models and LoRA adapters."""
